//! A hostile relay stand-in (filled in below).
