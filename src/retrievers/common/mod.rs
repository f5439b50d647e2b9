//! What the retrievers share, by concern: the default encoder (`encoder`), checked
//! embedding in batches (`embed`), JSON persistence with version, encoder and finiteness
//! checks (`persist`), the start of an index update (`update`), the start of a build
//! (`build`), turning a ranked list into results (`hits`), the chunks of one document ranked
//! as one (`parents`), and the generic core of the four
//! peer retrievers (`peer`). Everything is re-exported here, so `common::X` names it.

mod build;
mod embed;
mod encoder;
mod hits;
mod parents;
mod peer;
mod persist;
mod update;

pub(crate) use crate::cpu::blocking;

pub(crate) use build::*;
pub(crate) use embed::*;
pub use encoder::DefaultEncoder;
pub(crate) use hits::*;
pub use parents::ParentScoring;
pub(crate) use parents::{Parents, ParentsBuilder};
pub use peer::{Peer, PeerState, PeerUpdate};
pub(crate) use persist::*;
pub(crate) use update::*;

pub use build::Labelled;
