//! unwindlab's kernel model.
//!
//! For now this crate holds the SFrame reader ([`sframe`]) that the kernel
//! model's user unwinder, the validator and the generator all stand on.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod sframe;
