//! kumi runtime (being written).
