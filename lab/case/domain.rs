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

/// Which relay process is running, e.g. `relay-2`: the owner its claims record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    /// The relay's name, unique among the processes of a scenario.
    pub name: String,
}
