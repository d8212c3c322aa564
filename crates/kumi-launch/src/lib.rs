//! kumi launcher (being written).
