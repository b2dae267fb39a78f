//! Exit codes of asmguardctl (documented in the man page and README).

/// Success.
pub const OK: i32 = 0;
/// The operation failed (I/O error, daemon error).
pub const FAILED: i32 = 1;
/// Bad usage: arguments clap rejects (clap exits with 2 itself).
#[allow(dead_code)]
pub const USAGE: i32 = 2;
/// The input is not usable: no such path, wrong file type, too small, permission.
pub const BAD_INPUT: i32 = 3;

/// An error to print as one line, with the exit code to leave with.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<asmguard_devices::DevError> for CliError {
    fn from(e: asmguard_devices::DevError) -> Self {
        use asmguard_devices::DevError::*;
        let code = match e {
            NotFound(_) | PermissionDenied(_) | WrongType(..) | TooSmall(..) => BAD_INPUT,
            _ => FAILED,
        };
        CliError::new(code, e.to_string())
    }
}
