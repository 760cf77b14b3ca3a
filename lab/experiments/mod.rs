//! `notify try NAME`: experiments that measure what a fix costs.
