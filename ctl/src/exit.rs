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
/// load on this kernel); the status output says why and what to do. Also when a
/// protected disk is exposed: written through a mapping made before protection.
pub const UNPROTECTED: i32 = 7;
/// `import`: a disk the old configuration gave to ASM would be left unprotected by
/// the imported configuration (each is named with the command that fixes it);
/// `--allow-unprotected` says that is intended.
pub const IMPORT_UNPROTECTED: i32 = 8;
/// `import`: every disk is protected, but two rules give one disk two names: the
/// configuration names it after its first rule (written with `--write`); the
/// per-disk line says NAME CONFLICT and which rule's name was left out.
pub const IMPORT_NAME_CONFLICT: i32 = 9;

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
        IoError | Unavailable | Internal => FAILED,
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
            NotFound(_) | PermissionDenied(_) | WrongType(..) | TooSmall(..) | ReadOnly(_) => {
                BAD_INPUT
            }
            _ => FAILED,
        };
        CliError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_proto::ErrorBody;

    /// Every error kind the daemon sends, its stable wire name and the exit code
    /// it leads to. The exit code follows the kind alone: two different
    /// messages (a reworded or translated one) give the same code.
    #[test]
    fn exit_code_follows_the_kind_never_the_message() {
        use ErrorCode::*;
        let table = [
            (BadRequest, "bad_request", BAD_INPUT),
            (TooLarge, "too_large", BAD_INPUT),
            (UnsupportedVersion, "unsupported_version", UNREACHABLE),
            (UnknownOp, "unknown_op", UNREACHABLE),
            (PermissionDenied, "permission_denied", REFUSED),
            (InvalidLabel, "invalid_label", BAD_INPUT),
            (NotFound, "not_found", BAD_INPUT),
            (NotManageable, "not_manageable", BAD_INPUT),
            (RefusedData, "refused_data", REFUSED),
            (RefusedAsmHeader, "refused_asm_header", REFUSED),
            (RefusedLabelled, "refused_labelled", REFUSED),
            (RefusedMember, "refused_member", REFUSED),
            (LabelConflict, "label_conflict", REFUSED),
            (InUse, "in_use", REFUSED),
            (Busy, "busy", BUSY),
            (IoError, "io_error", FAILED),
            (Unavailable, "unavailable", FAILED),
            (Internal, "internal", FAILED),
        ];
        for (kind, wire, code) in table {
            assert_eq!(serde_json::to_value(kind).unwrap(), wire, "{kind:?}");
            let line = format!(r#"{{"code":"{wire}","message":"x"}}"#);
            let back: ErrorBody = serde_json::from_str(&line).unwrap();
            assert_eq!(back.code, kind);
            for msg in ["busy", "permission denied", "not found", "", "in use"] {
                let e = CliError::from(ErrorBody::new(kind, msg));
                assert_eq!(e.code, code, "{kind:?} with message {msg:?}");
                assert_eq!(e.message, msg);
            }
        }
        // An exhaustive match numbers every kind (a new kind fails to compile
        // here until it has a number): a kind the table forgets leaves its
        // number out, and a kind listed twice is counted once.
        let number = |k: ErrorCode| match k {
            BadRequest => 0,
            TooLarge => 1,
            UnsupportedVersion => 2,
            UnknownOp => 3,
            PermissionDenied => 4,
            InvalidLabel => 5,
            NotFound => 6,
            NotManageable => 7,
            RefusedData => 8,
            RefusedAsmHeader => 9,
            RefusedLabelled => 10,
            RefusedMember => 11,
            LabelConflict => 12,
            InUse => 13,
            Busy => 14,
            IoError => 15,
            Unavailable => 16,
            Internal => 17,
        };
        let mut seen: Vec<usize> = table.iter().map(|(k, _, _)| number(*k)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, (0..=number(Internal)).collect::<Vec<_>>());
        assert_eq!(table.len(), 18);
    }
}
