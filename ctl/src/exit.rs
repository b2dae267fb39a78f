//! Exit codes of asmguardctl (documented in the man page and README).

use asmguard_proto::ErrorCode;

/// Success.
pub const OK: i32 = 0;
/// The operation failed (I/O error, read-back mismatch, daemon bug).
pub const FAILED: i32 = 1;
/// Bad usage: arguments clap rejects (clap exits with 2 itself).
#[allow(dead_code)]
pub const USAGE: i32 = 2;
/// The input is not usable: no such path/label, wrong type, too small, excluded,
/// invalid label, permission on a file.
pub const BAD_INPUT: i32 = 3;
/// Refused: data, ASM header or another label on the disk, in use, label taken, or
/// the caller may not do this.
pub const REFUSED: i32 = 4;
/// asmguardd not reachable (not running, wrong socket, protocol mismatch, timeout).
pub const UNREACHABLE: i32 = 5;
/// Busy: another request is labelling the disk or label right now; try again.
pub const BUSY: i32 = 6;
/// `status`: the daemon runs but no write filter protects the disks (none could
/// load on this kernel); the status output says why and what to do.
pub const UNPROTECTED: i32 = 7;

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

/// The exit code for a daemon error code.
pub fn for_code(c: ErrorCode) -> i32 {
    use ErrorCode::*;
    match c {
        NotFound | NotManageable | InvalidLabel | BadRequest | TooLarge => BAD_INPUT,
        PermissionDenied | RefusedData | RefusedAsmHeader | RefusedLabelled | RefusedMember
        | LabelConflict | InUse => REFUSED,
        UnsupportedVersion | UnknownOp => UNREACHABLE,
        Busy => BUSY,
        IoError | Internal => FAILED,
    }
}

impl From<asmguard_proto::ErrorBody> for CliError {
    fn from(e: asmguard_proto::ErrorBody) -> Self {
        CliError::new(for_code(e.code), e.message)
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
