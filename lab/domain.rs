//! The workshop's data: the inputs the cases' operations receive.

use serde::{Deserialize, Serialize};

/// An admin's request to add someone to a workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invite {
    /// Who is invited, e.g. `dana@example.com`.
    pub email: String,
    /// The workspace they join, e.g. `ws_acme`.
    pub workspace: String,
}
