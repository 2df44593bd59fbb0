//! How every subcommand ends: one exit convention for the whole command.

use std::process::ExitCode;

/// How every subcommand ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Done, and every object, file or URL passed.
    Ok,
    /// Done, and something was refused: an object rejected, a query Placement would answer
    /// with an error, a URL that did not answer 2xx; or the operator failed.
    Failed,
    /// The input could not be read or the arguments cannot work together.
    BadInput,
}

impl Exit {
    /// The exit for a process exit code of 0, 1 or 2 (anything above 2 is bad input).
    pub fn from_code(code: u8) -> Exit {
        match code {
            0 => Exit::Ok,
            1 => Exit::Failed,
            _ => Exit::BadInput,
        }
    }

    /// The process exit code: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::BadInput => 2,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}
