//! The single-producer/single-consumer ring (skeleton).
