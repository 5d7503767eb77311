//! What ckptspec answers for users' own configs and folders, from the same rules that reproduce
//! every golden run: [`plan`] (a config, without training) and [`inspect`] (a real output folder).

pub mod inspect;
pub mod plan;
