//! The asmguard control protocol, shared by `asmguardd` and `asmguardctl`.
//!
//! One request per line, one response per line, both JSON:
//!
//! ```text
//! -> {"version":1,"id":7,"op":"label","args":{"label":"DATA1","device":"/dev/sdb"}}
//! <- {"version":1,"id":7,"ok":true,"result":{...}}
//! <- {"version":1,"id":7,"ok":false,"error":{"code":"refused_data","message":"..."}}
//! ```
//!
//! `reclaim` is the one operation that may answer with several lines: zero or more
//! progress lines `{"version":1,"id":7,"progress":{...}}` ([`ProgressLine`], a
//! [`ReclaimProgress`]) before its final response. Closing the connection while it
//! runs cancels it cleanly (a rerun completes the job).
//!
//! A request line is at most [`MAX_REQUEST_LEN`] bytes (newline included). Requests are
//! parsed in two steps ([`parse_request`]): first the envelope, then the arguments of the
//! named operation, so every malformed, oversized, unknown or wrongly versioned request
//! gets a structured [`ErrorBody`] with a precise [`ErrorCode`].

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

pub use asmguard_filter_types::denial::{Denial, DeviceType, Operation};
pub use asmguard_filter_types::{KernelDev, PinFound, Program, ProgramRuns, ReplacedPin};
use serde_json::Value;
use std::collections::BTreeMap;

/// The protocol version this crate speaks.
pub const VERSION: u32 = 1;
/// The longest request line the daemon accepts, newline included.
pub const MAX_REQUEST_LEN: usize = 64 * 1024;
/// The default socket path.
pub const DEFAULT_SOCKET: &str = asmguard_paths::DEFAULT_SOCKET;

/// Whether an operation only reads (admin group may) or changes state (root only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    pub op: Op,
}

/// Declares the operations once: each row gives its wire name, its access,
/// for an operation that takes them its arguments, and the method that
/// answers it. The [`Op`] enum (serde-tagged by that name:
/// `{"op":"label","args":{...}}`), [`Op::name`], [`Op::access`],
/// [`Op::NAMES`], one trait per row in [`serve`] (named after the variant:
/// `serve::Label`), [`Serve`] (all of them) and the dispatch [`Op::serve`]
/// all come from these rows.
macro_rules! ops {
    ($( $(#[$doc:meta])* $name:literal => $variant:ident $(($args:ty))? : $access:ident => $method:ident, )*) => {
        /// The operations.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "op", content = "args")]
        pub enum Op {
            $( $(#[$doc])* #[serde(rename = $name)] $variant $(($args))?, )*
        }

        impl Op {
            /// Every operation's wire name and whether it takes arguments.
            pub const NAMES: &'static [(&'static str, bool)] =
                &[$( ($name, ops!(@takes $($args)?)), )*];

            /// The wire name.
            pub fn name(&self) -> &'static str {
                match self { $( Op::$variant { .. } => $name, )* }
            }

            /// Who may run it.
            pub fn access(&self) -> Access {
                match self { $( Op::$variant { .. } => Access::$access, )* }
            }

            /// Serves the operation with the method of its row's trait
            /// ([`serve`]) on `server`, for `caller` (as the daemon's
            /// journal names the peer), its answer as JSON: the daemon's
            /// whole dispatch.
            pub fn serve<S>(&self, server: &S, caller: &str) -> Result<Value, ErrorBody>
            where
                S: $( serve::$variant + )* ?Sized,
            {
                match self {
                    $( Op::$variant $((ops!(@bind args $args)))? =>
                        answer(serve::$variant::$method(server, $(ops!(@bind args $args),)? caller)?), )*
                }
            }
        }

        /// What serves the operations: one trait per row of [`Op`], named
        /// after its variant, with the row's method (its arguments and the
        /// caller; its answer is serialised as the response's `result`). The
        /// daemon implements each where that operation's work is, so a new
        /// operation is its row here, its impl there, and its subcommand in
        /// the CLI; a row without its impl does not compile ([`Serve`]).
        pub mod serve {
            use super::*;
            $(
                $(#[$doc])*
                pub trait $variant {
                    fn $method(&self, $(args: &$args,)? caller: &str)
                        -> Result<impl Serialize, ErrorBody>;
                }
            )*
        }

        /// Every row's trait of [`serve`] at once: what serves the whole
        /// protocol (implemented for any type that serves each row).
        pub trait Serve: $( serve::$variant + )* {}
        impl<T: $( serve::$variant + )* ?Sized> Serve for T {}
    };
    (@takes $args:ty) => { true };
    (@takes) => { false };
    (@bind $a:ident $args:ty) => { $a };
}

/// An operation's answer as the response's `result`.
fn answer<T: Serialize>(v: T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v)
        .map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("encoding the answer: {e}")))
}

ops! {
    /// Liveness check; answers the daemon version.
    "ping" => Ping: Read => ping,
    /// The managed disks and label conflicts.
    "lsdsk" => Lsdsk: Read => lsdsk,
    /// Re-read every device, then answer like `lsdsk` (it changes nothing on
    /// the disks, so the admin group may ask for it).
    "scan" => Scan: Read => scan,
    /// Daemon, kernel and filter status.
    "status" => Status: Read => status,
    /// The latency histograms of every traced disk now (cumulative): a
    /// snapshot as JSON (asmguard-iostat's `Snapshot`), for `asmguardctl iostat`.
    "iostat" => Iostat: Read => iostat,
    /// `label LABEL DEVICE [--force] [--migrate]` (root only).
    "label" => Label(LabelArgs): Write => label,
    /// `unlabel LABEL [--force]` (root only).
    "unlabel" => Unlabel(UnlabelArgs): Write => unlabel,
    /// `rename OLD NEW` (root only).
    "rename" => Rename(RenameArgs): Write => rename,
    /// `filter enable|disable|audit [LABEL]` (root only).
    "filter" => Filter(FilterArgs): Write => filter,
    /// The write filter's events (denials, audited writes) after a sequence number.
    "events" => Events(EventsArgs): Read => events,
    /// Give free ASM allocation units back to a thin-provisioned array (root only;
    /// streams progress lines before the response).
    "reclaim" => Reclaim(ReclaimArgs): Write => reclaim,
}

/// `label LABEL DEVICE [--force] [--migrate]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelArgs {
    pub label: String,
    /// A device path (`/dev/sdb`, `/dev/mapper/mpatha`, a symlink to one).
    pub device: String,
    /// Erase foreign signatures (data!) or replace another label.
    #[serde(default)]
    pub force: bool,
    /// Keep an existing ASM disk header and only set the label in it.
    #[serde(default)]
    pub migrate: bool,
}

/// `unlabel LABEL [--force]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnlabelArgs {
    pub label: String,
    /// Also when the ASM disk header says the disk is a disk-group member.
    #[serde(default)]
    pub force: bool,
}

/// `rename OLD NEW`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameArgs {
    pub old: String,
    pub new: String,
}

/// What `filter` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterAction {
    /// Enforce.
    Enable,
    /// Off (for one disk); without a label, remove the programs.
    Disable,
    /// Log and allow.
    Audit,
}

/// How `reclaim` hands space back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimMethod {
    /// BLKDISCARD (UNMAP / TRIM / WRITE SAME with unmap).
    Discard,
    /// BLKZEROOUT (for arrays that detect zeros but take no UNMAP).
    Zeroout,
}

/// What a path is to its disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Carries the label (and is not a multipath device).
    Labelled,
    /// The multipath (dm) device above the paths: the top.
    Multipath,
    /// A path below a multipath device.
    Path,
    /// The whole disk of a labelled partition.
    Parent,
}

/// Whether `/dev/asmguard/disks/<label>` leads to the disk's top device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// It does.
    Ok,
    /// It does not exist (udev rules not installed, or no udevd).
    Missing,
    /// It leads elsewhere (`DiskInfo::stable_link_target` says where).
    Wrong,
}

/// The state of protection `status` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// A backend filters opens, writes, ioctls and mappings.
    Protected,
    /// A backend filters write-opens only (the cgroup-device fallback).
    Degraded,
    /// An administrator disabled the filter.
    Off,
    /// No backend could load (`filter_reason` says why; `status` exits with 7).
    Unprotected,
}

/// What the filter covers of one disk (`lsdsk`'s `filter_scope`);
/// `asmguardctl` renders it, with `filter_mode` and `filter_backend`, as the
/// Filtering sentence (`enforce (lsm)`, `audit (cgroup_device, open-time
/// only)`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterScope {
    /// Opens, writes, ioctls and mappings (the security-hook backends).
    Full,
    /// Write-opens only (the cgroup-device fallback).
    OpenTimeOnly,
    /// An administrator removed the programs (`filter disable`).
    Disabled,
    /// No backend could load.
    Unprotected,
    /// The daemon runs no filter for it (not under the filter yet).
    #[default]
    NoFilter,
}

macro_rules! words {
    ($($t:ty { $($v:ident => $w:literal),* $(,)? })*) => {$(
        impl $t {
            /// The wire word.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $w),* }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($w => Ok(Self::$v),)*
                    _ => Err(format!("{s:?} is not one of {}", [$($w),*].join(", "))),
                }
            }
        }
    )*};
}

words! {
    FilterAction { Enable => "enable", Disable => "disable", Audit => "audit" }
    ReclaimMethod { Discard => "discard", Zeroout => "zeroout" }
    Role { Labelled => "labelled", Multipath => "multipath", Path => "path", Parent => "parent" }
    LinkState { Ok => "ok", Missing => "missing", Wrong => "wrong" }
    LabelAction {
        Labelled => "labelled",
        Migrated => "migrated",
        Relabelled => "relabelled",
        Unchanged => "unchanged",
        Unlabelled => "unlabelled",
        Renamed => "renamed",
    }
    FilterScope {
        Full => "full",
        OpenTimeOnly => "open_time_only",
        Disabled => "disabled",
        Unprotected => "unprotected",
        NoFilter => "no_filter",
    }
    Protection {
        Protected => "protected",
        Degraded => "degraded",
        Off => "off",
        Unprotected => "unprotected",
    }
}

/// `filter enable|disable|audit [LABEL]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterArgs {
    /// `enable` (enforce), `disable` (off; without a label: remove the programs),
    /// `audit` (log and allow).
    pub action: FilterAction,
    /// One disk; all disks when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `events`: the kept events whose sequence number is above `after` (0: all kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    #[serde(default)]
    pub after: u64,
}

/// `reclaim LABEL... | --diskgroup NAME [--dry-run] [--rate MiB/s] [--method M]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReclaimArgs {
    /// Labels of the disks; empty when `diskgroup` is given.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Every managed disk whose ASM header names this disk group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskgroup: Option<String>,
    /// Plan and report only: nothing is written.
    #[serde(default)]
    pub dry_run: bool,
    /// Bytes per second over all disks (0: unthrottled).
    #[serde(default)]
    pub rate_bytes: u64,
    /// `discard` (BLKDISCARD) or `zeroout` (BLKZEROOUT).
    #[serde(default = "default_method")]
    pub method: ReclaimMethod,
    /// Seconds to watch the heartbeat block and mount stamp for a change.
    #[serde(default = "default_watch")]
    pub watch_seconds: f64,
    /// Online mode: hand back everything above each disk's ASM size
    /// (`dsksize`), where ASM never allocates, with the disk group mounted.
    #[serde(default)]
    pub above_size: bool,
    /// Halve the rate when the disk's p99 latency rises above this multiple
    /// of its p99 before the run (0: a fixed rate).
    #[serde(default = "default_p99_multiple")]
    pub p99_multiple: f64,
}

fn default_p99_multiple() -> f64 {
    4.0
}

fn default_method() -> ReclaimMethod {
    ReclaimMethod::Discard
}

fn default_watch() -> f64 {
    7.0
}

impl Eq for ReclaimArgs {}

/// Progress of a running `reclaim` (one per progress line): what the reclaim
/// crate reports while it works, sent as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimProgress {
    /// `checking` (safety checks and watch window), `reclaiming`.
    pub phase: String,
    pub label: String,
    pub done_bytes: u64,
    pub total_bytes: u64,
    pub percent: f64,
    pub rate_bytes_per_sec: f64,
    pub eta_seconds: f64,
    /// The rate limit now (0: unthrottled): `--rate`, or less when the
    /// adaptive rate slowed down.
    #[serde(default)]
    pub rate_limit_bytes_per_sec: f64,
    /// Why the limit last changed (empty: it has not).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rate_note: String,
}

/// A progress line: `{"version":1,"id":7,"progress":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressLine {
    pub version: u32,
    pub id: u64,
    pub progress: ReclaimProgress,
}

/// One disk in the answer to `reclaim`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimDisk {
    pub label: String,
    pub device: String,
    pub disk_group: String,
    pub method: ReclaimMethod,
    pub ausize: u64,
    pub dsksize_aus: u64,
    /// AUs the allocation table positively says are free (reserved ones excluded).
    pub free_aus: u64,
    /// AT blocks read / accepted, and why others were not used.
    pub at_blocks_read: u64,
    pub at_blocks_valid: u64,
    #[serde(default)]
    pub at_rejected: Vec<String>,
    /// Bytes the plan hands back (after alignment), and its number of ranges.
    pub planned_bytes: u64,
    pub ranges: u64,
    /// Free bytes lost to the device's discard granularity/alignment.
    pub unaligned_bytes: u64,
    /// Bytes handed back by this run, and before it (resumed from a checkpoint).
    pub reclaimed_bytes: u64,
    pub resumed_from_bytes: u64,
    pub cancelled: bool,
    pub scan_seconds: f64,
    pub elapsed_seconds: f64,
    pub rate_bytes_per_sec: f64,
    pub discard_granularity: u64,
    pub discard_max_bytes: u64,
    /// `--above-size`: the plan is everything above `dsksize_aus`.
    #[serde(default)]
    pub above_size: bool,
    /// Set when the run stopped before its plan was done because the disk
    /// changed under it (another host woke up, the disk grew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<ReclaimStop>,
}

/// What stopped a reclaim before the next discard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimStop {
    /// `heartbeat`, `mount_stamp`, `allocation_table`, `disk_size`, `header`,
    /// `read_error`, or `not_started` (another disk of the request stopped).
    pub what: String,
    /// The whole sentence, as the CLI prints it.
    pub message: String,
    /// Bytes this run had handed back when it stopped.
    pub done_bytes: u64,
    /// Local time the change was seen (`HH:MM:SS`).
    pub seen_at: String,
}

/// The answer to `reclaim`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimResult {
    pub dry_run: bool,
    pub disks: Vec<ReclaimDisk>,
    pub planned_bytes: u64,
    pub reclaimed_bytes: u64,
}

impl Request {
    /// The JSON line (without the newline) for this request:
    /// `{"version":1,"id":7,"op":"label","args":{...}}`.
    pub fn to_line(&self) -> String {
        let mut m = serde_json::Map::new();
        m.insert("version".into(), VERSION.into());
        m.insert("id".into(), self.id.into());
        if let Ok(Value::Object(op)) = serde_json::to_value(&self.op) {
            m.extend(op);
        }
        Value::Object(m).to_string()
    }
}

/// Machine-readable error codes. The message says the rest in one sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, not an object, a field of the wrong type, arguments that do not fit.
    BadRequest,
    /// A request line longer than [`MAX_REQUEST_LEN`].
    TooLarge,
    /// A `version` this daemon does not speak.
    UnsupportedVersion,
    /// An `op` this daemon does not know.
    UnknownOp,
    /// SO_PEERCRED says the caller may not do this.
    PermissionDenied,
    /// The label is not valid (characters, length).
    InvalidLabel,
    /// No such device, or no disk with that label.
    NotFound,
    /// Not a block device, or excluded by the configuration.
    NotManageable,
    /// The disk holds data (foreign signatures): needs `--force`.
    RefusedData,
    /// The disk holds an ASM disk header: needs `--migrate`.
    RefusedAsmHeader,
    /// The disk carries another label: needs `--force` or `rename`.
    RefusedLabelled,
    /// The disk is a member of a disk group: `unlabel` needs `--force`.
    RefusedMember,
    /// The label is already used by another disk (or two disks claim it).
    LabelConflict,
    /// Mounted, held by dm/md, or opened exclusively elsewhere.
    InUse,
    /// Another request is labelling this disk (or this label) right now.
    Busy,
    /// Reading or writing the device failed, or the read-back did not match.
    IoError,
    /// What the request needs is off in this daemon (the latency tracer could
    /// not load); the message says why.
    Unavailable,
    /// A bug: the daemon caught it and kept running.
    Internal,
}

/// The error part of a failed response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A response line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub version: u32,
    /// The request's id (0 when the request was too broken to have one).
    pub id: u64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl Response {
    pub fn ok(id: u64, result: Value) -> Self {
        Response {
            version: VERSION,
            id,
            ok: true,
            result: Some(result),
            error: None,
        }
    }
    pub fn err(id: u64, e: ErrorBody) -> Self {
        Response {
            version: VERSION,
            id,
            ok: false,
            result: None,
            error: Some(e),
        }
    }
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            format!(
                r#"{{"version":{VERSION},"id":{},"ok":false,"error":{{"code":"internal","message":"response could not be encoded"}}}}"#,
                self.id
            )
        })
    }
    /// The result, or the error.
    pub fn into_result(self) -> Result<Value, ErrorBody> {
        match (self.ok, self.result, self.error) {
            (true, Some(v), _) => Ok(v),
            (true, None, _) => Ok(Value::Null),
            (false, _, Some(e)) => Err(e),
            (false, _, None) => Err(ErrorBody::new(
                ErrorCode::Internal,
                "the daemon reported a failure without saying what",
            )),
        }
    }
}

/// Parse one request line (without its newline). On error, the id is returned as far
/// as it could be read (0 otherwise) so the response can carry it.
pub fn parse_request(line: &[u8]) -> Result<Request, (u64, ErrorBody)> {
    // The limit counts the newline, which `line` no longer has.
    if line.len() + 1 > MAX_REQUEST_LEN {
        return Err((
            0,
            ErrorBody::new(
                ErrorCode::TooLarge,
                format!(
                    "request of {} bytes (newline included) is larger than the limit of {MAX_REQUEST_LEN} bytes",
                    line.len() + 1
                ),
            ),
        ));
    }
    let e = Envelope::parse(line)?;
    let id = e.id()?;
    e.check_version(id)?;
    let op = e.op_name(id)?;
    if let Some(k) = e.unknown.keys().next() {
        return Err(bad(id, format!("unknown field `{k}` in request")));
    }
    let Some(&(name, takes_args)) = Op::NAMES.iter().find(|(name, _)| *name == op) else {
        let shown: String = op.chars().take(64).collect();
        let known: Vec<&str> = Op::NAMES.iter().map(|(n, _)| *n).collect();
        return Err((
            id,
            ErrorBody::new(
                ErrorCode::UnknownOp,
                format!(
                    "unknown operation {shown:?}: known are {}",
                    known.join(", ")
                ),
            ),
        ));
    };
    let mut tagged = serde_json::Map::new();
    tagged.insert("op".into(), name.into());
    if takes_args {
        tagged.insert(
            "args".into(),
            e.args.unwrap_or(Value::Object(Default::default())),
        );
    } else {
        match e.args {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) if o.is_empty() => {}
            Some(_) => return Err(bad(id, format!("`{name}` takes no arguments"))),
        }
    }
    let op: Op = serde_json::from_value(Value::Object(tagged))
        .map_err(|e| bad(id, format!("bad arguments for `{name}`: {e}")))?;
    op.check().map_err(|m| bad(id, m))?;
    Ok(Request { id, op })
}

type ParseError = (u64, ErrorBody);

fn bad(id: u64, m: String) -> ParseError {
    (id, ErrorBody::new(ErrorCode::BadRequest, m))
}

/// A request line's envelope, as serde reads it; the fields are checked one by
/// one so that each mistake gets its own message and the request's id.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    version: Option<Value>,
    #[serde(default)]
    op: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

impl Envelope {
    fn parse(line: &[u8]) -> Result<Envelope, ParseError> {
        let text = std::str::from_utf8(line)
            .map_err(|e| bad(0, format!("request is not UTF-8 text: {e}")))?;
        let v: Value = serde_json::from_str(text)
            .map_err(|e| bad(0, format!("request is not valid JSON: {e}")))?;
        if !v.is_object() {
            return Err(bad(0, "request must be a JSON object".into()));
        }
        serde_json::from_value(v).map_err(|e| bad(0, format!("request envelope: {e}")))
    }

    fn id(&self) -> Result<u64, ParseError> {
        match &self.id {
            None => Ok(0),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or(0)),
            Some(_) => Err(bad(0, "`id` must be a non-negative integer".into())),
        }
    }

    fn check_version(&self, id: u64) -> Result<(), ParseError> {
        match &self.version {
            None => Err(bad(id, "`version` is missing".into())),
            Some(Value::Number(n)) if n.as_u64() == Some(VERSION as u64) => Ok(()),
            Some(v) => Err((
                id,
                ErrorBody::new(
                    ErrorCode::UnsupportedVersion,
                    format!(
                        "protocol version {v} is not supported: this daemon speaks version {VERSION}"
                    ),
                ),
            )),
        }
    }

    fn op_name(&self, id: u64) -> Result<String, ParseError> {
        match &self.op {
            Some(Value::String(s)) => Ok(s.clone()),
            None => Err(bad(id, "`op` is missing".into())),
            Some(_) => Err(bad(id, "`op` must be a string".into())),
        }
    }
}

impl Op {
    /// What serde cannot say about the arguments of a parsed operation.
    fn check(&self) -> Result<(), String> {
        if let Op::Reclaim(a) = self {
            if a.labels.is_empty() == a.diskgroup.is_none() {
                return Err("reclaim needs either labels or a disk group (not both)".into());
            }
            if !(0.0..=3600.0).contains(&a.watch_seconds) {
                return Err("reclaim watch must be 0 to 3600 seconds".into());
            }
        }
        Ok(())
    }
}

// ---- Results ----------------------------------------------------------------------

/// One path (block device) that reaches a disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathInfo {
    /// Kernel name (`sdb`, `dm-3`, `loop5`, `nvme0n1p1`).
    pub name: String,
    /// `/dev/<name>`, or `/dev/mapper/<name>` for a dm device.
    pub dev: String,
    /// `major:minor`.
    pub devno: String,
    /// The kernel's dev_t encoding (`major << 20 | minor`), the filter's map key.
    pub kdev: u32,
    /// `labelled` (carries the label), `multipath` (dm device above), `path` (a path
    /// below a multipath device), `parent` (the whole disk of a labelled partition).
    pub role: Role,
}

/// A managed disk (one label).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskInfo {
    pub label: String,
    /// The device a DBA should point ASM at: the multipath device if any.
    pub top: String,
    /// `/dev/asmguard/disks/<label>` (made by udev).
    pub stable_path: String,
    /// Whether the stable path exists and leads to the top device: `ok`, `missing`
    /// (udev has not made it: rules not installed, or no udevd), or `wrong`.
    pub stable_link: LinkState,
    /// Where a `wrong` stable path leads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_link_target: Option<String>,
    pub paths: Vec<PathInfo>,
    /// The hidden path devices of an NVMe native multipath head
    /// (`nvme0c1n1`), managed with the disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvme_paths: Vec<String>,
    /// The controllers of such a head's subsystem (`nvme0`, `nvme1`): their
    /// nodes (`/dev/nvme0`) are managed with the disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvme_controllers: Vec<String>,
    pub size_bytes: u64,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    /// `none` (a label only), or the ASM header status (`MEMBER`, `CANDIDATE`, ...).
    pub header_status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asm_disk_name: Option<String>,
    /// Write filtering of this disk as a DBA reads it (`enforce (lsm)`,
    /// `audit (cgroup_device, open-time only)`, `off`, ...): display text
    /// that `asmguardctl` renders from the three fields below (the daemon
    /// sends none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filtering: String,
    /// The mode the filter applies to it (`enforce`, `audit`, `off`, or
    /// `UNPROTECTED` without a backend): the `asmguard_filter_mode` word.
    #[serde(default)]
    pub filter_mode: String,
    /// The backend filtering it (`lsm`, `fmod_ret`, `cgroup_device`, `none`).
    #[serde(default)]
    pub filter_backend: asmguard_filter_types::BackendName,
    /// What the filter covers of it.
    #[serde(default)]
    pub filter_scope: FilterScope,
    /// True when the same label is on another disk too: neither is picked.
    pub conflict: bool,
    /// Protected, but a process mapped it shared-writable before it was (the
    /// kernel judges a mapping only when it is made): writes through that
    /// mapping still land. `StatusResult::exposed` names the processes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exposed: bool,
    /// Loop devices set up over it before it was protected (by path, or
    /// bound to a descriptor of it), by kernel name: they joined its devices,
    /// so their writes are judged as the disk's. `StatusResult::loops_before`
    /// says more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loops_before: Vec<String>,
    /// The LUN's serial (udev's `ID_SERIAL`; for SCSI, the WWID multipathd uses),
    /// where udevd runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The LUN's World Wide Name (udev's `ID_WWN`), where udevd runs and the device
    /// has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    /// The device nodes made for containers (`[[container]] present`), one
    /// per container the disk is presented to.
    #[serde(default)]
    pub presented: Vec<Presentation>,
    /// How the disk is known: `label` (the ASMLib/AFD/asmguard label on it),
    /// `asm_header` (no label: the disk name in its ASM disk header) or
    /// `udev_name` (no label: the name `[devices.member_names]` gives its LUN).
    #[serde(default = "identified_by_label")]
    pub identified_by: String,
}

fn identified_by_label() -> String {
    "label".into()
}

/// A disk's device node for a container: `/dev/asmguard/containers/<container>/<LABEL>`,
/// the top device's number, owned by host ids (the container's owner and
/// group through its id maps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presentation {
    pub container: String,
    pub path: String,
    /// Host uid and gid of the node.
    pub uid: u32,
    pub gid: u32,
    /// Permission bits, octal (`0660`).
    pub mode: String,
}

/// Why a container (no `label`: none of its nodes) or one label has no node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotPresented {
    pub container: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub reason: String,
}

/// The same label found on disks that are not paths of one another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub label: String,
    /// The top device of each claimant.
    pub devices: Vec<String>,
    /// The claimant that had the label first and keeps it (its link, nodes
    /// and filter rules); the others are newcomers, never linked or presented.
    /// Absent: none is known to have been first, none is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// The answer to `lsdsk` and `scan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsdskResult {
    pub disks: Vec<DiskInfo>,
    /// The Oracle homes whose binaries may write (`oracle_homes`): kind,
    /// path, binaries. (Each was a sentence: `grid home /u01/app/19c/grid:
    /// oracle (uid 54331), ...`.)
    #[serde(default)]
    pub oracle_homes: Vec<OracleHome>,
    /// Binaries no home has any more that a process still runs: allowed
    /// until their processes exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracle_retired: Vec<OracleBinary>,
    pub conflicts: Vec<Conflict>,
    /// Devices looked at (after include/exclude).
    pub devices_scanned: usize,
    /// Devices that could not be read, with the reason.
    #[serde(default)]
    pub unreadable: Vec<String>,
    /// Devices with an ASM label header (`ORCLDISK`) that asmguardd does not
    /// manage: blkid, udev and ASM may still see a label on them.
    #[serde(default)]
    pub unmanaged: Vec<UnmanagedDisk>,
    /// Containers (or labels of theirs) that get no device node, and why.
    #[serde(default)]
    pub not_presented: Vec<NotPresented>,
}

/// A device with an ASM label header that asmguardd does not manage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnmanagedDisk {
    pub device: String,
    /// The label as util-linux blkid reads it (empty: none).
    pub label: String,
    /// Why asmguardd does not manage it.
    pub reason: String,
}

/// What `label`, `unlabel` or `rename` did to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelAction {
    /// A label written on a disk that had none.
    Labelled,
    /// The label set inside an existing ASM disk header (`--migrate`).
    Migrated,
    /// Another label replaced (`--force`).
    Relabelled,
    /// The disk already carried this label: nothing written.
    Unchanged,
    /// The label removed.
    Unlabelled,
    /// The label changed by `rename`.
    Renamed,
}

/// The answer to `label`, `unlabel`, `rename`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelResult {
    pub action: LabelAction,
    pub label: String,
    pub device: String,
    /// Foreign signatures erased (with `--force`).
    #[serde(default)]
    pub erased: Vec<String>,
    /// Byte ranges written, `offset+len`.
    #[serde(default)]
    pub written: Vec<String>,
}

/// The answer to `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResult {
    pub daemon_version: String,
    pub protocol_version: u32,
    pub pid: u32,
    pub uptime_seconds: u64,
    pub kernel: String,
    /// Whether `bpf` is an active LSM, and the kernel's active LSMs. It was
    /// a sentence (`yes (lsm=...)`, `no (lsm=...)`, `unknown (...)`).
    pub bpf_lsm: BpfLsm,
    pub filter_backend: asmguard_filter_types::BackendName,
    /// `[filter] mode`: `enforce`, `audit` or `off`.
    pub default_filter_mode: asmguard_filter_types::Mode,
    pub disks: usize,
    pub conflicts: usize,
    pub devices_scanned: usize,
    pub socket: String,
    /// The Prometheus endpoint (where it listens, whether it serves) and the
    /// I/O latency tracer's state. It was the sentence `metrics_address`
    /// (`http://ADDR/metrics (serving) (latency: block tracepoints (...))`).
    #[serde(default)]
    pub metrics: MetricsEndpoint,
    pub config: String,
    /// Where device events come from: `{"source": "udev"}` (udevd runs: its
    /// events, after its rules), `{"source": "kernel"}` (no udevd; with
    /// `udev_failed` when udevd runs but its monitor failed), or `{"source":
    /// "none", "reason": ...}`. It was a sentence (`udev`, `kernel uevents (no
    /// udevd)`, `none (...)`).
    #[serde(alias = "monitor")]
    pub events: EventSource,
    pub last_scan_ms: u64,
    /// What the filter covers: `full` (the security-hook backends),
    /// `open_time_only` (the cgroup-device fallback), `disabled` or
    /// `unprotected` (no filter: `filter_reason` says why). It was a
    /// sentence (`degraded: open-time only`, or the reason).
    #[serde(default)]
    pub filter_coverage: FilterScope,
    /// Why this backend, or why none: how it was chosen (`requested`,
    /// `readopted`, `best` with the kernel's LSM list and the better
    /// backends refused), what the load found (`notes`), why there is no
    /// filter (`none`), what another process changed (`changed`). It was a
    /// sentence; `asmguardctl status` writes it from these.
    #[serde(default)]
    pub filter_reason: asmguard_filter_types::FilterReason,
    /// The rule SG_IO and NVMe passthrough get: `by_class`,
    /// `by_class_in_memory`, `all_or_nothing`, `open_only`, or `null` (no
    /// filter); `asmguardctl status` says what each means. It was that
    /// sentence.
    #[serde(default)]
    pub filter_passthrough: Option<asmguard_filter_types::PassthroughRule>,
    /// The attached BPF programs: name, kernel id, hook.
    #[serde(default)]
    pub filter_programs: Vec<Program>,
    /// Other BPF programs attached to the same kernel functions as the
    /// filter's (another security tool, a second instance): name, kernel id
    /// and hook (`null`: the kernel does not say which security function).
    /// The first non-zero verdict of the programs on one function wins.
    /// (Each was a sentence: `NAME (id N) on HOOK`.)
    #[serde(default)]
    pub filter_other_programs: Vec<Program>,
    /// What each of the filter's programs has run: name, `run_time_ns`,
    /// `run_cnt` (counted while `kernel.bpf_stats_enabled` is 1; `--json`
    /// only: the lab's cost benches read it, since where the pins are guarded
    /// `bpftool prog show` cannot open the filter's programs). (Each was a
    /// sentence: `NAME RUN_TIME_NS RUN_CNT`.)
    #[serde(default)]
    pub filter_program_runs: Vec<ProgramRuns>,
    /// Devices in the kernel's managed set.
    #[serde(default)]
    pub filter_devices: usize,
    /// The majors the filter's programs look devices up under, as the kernel
    /// has them (`ag_majors`): block and character; `null` without a filter.
    /// (It was a sentence: `blk=8,259 chr=21`.)
    #[serde(default)]
    pub filter_majors: Option<Majors>,
    /// Who may write, one rule each (the plain allow-list's users, groups
    /// and executables, each `[[rule]]`, the Oracle homes' binaries by
    /// owner), then the daemon's own process. (Each was a sentence: `any
    /// process of user grid`, `rule db: user grid AND unit db.service` ...)
    #[serde(default)]
    pub allow_rules: Vec<AllowRule>,
    /// What to know about the rules: a rule any process of a user satisfies
    /// (a shell's `dd` too) and how to tighten it, what this backend cannot
    /// judge, what could not be resolved. (Each was a sentence.)
    #[serde(default)]
    pub allow_notes: Vec<RuleNote>,
    /// The Oracle homes found (`oracle_homes`) and their allowed binaries.
    #[serde(default)]
    pub oracle_homes: Vec<OracleHome>,
    /// Binaries no home has any more that a process still runs: allowed
    /// until their processes exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracle_retired: Vec<OracleBinary>,
    /// The filter's pinned maps and links: `guarded` (no other task may get
    /// them by id, write the maps or detach the links), `watched` (every 2 s
    /// the daemon compares them with what it wrote and puts back what
    /// another process changed), or `none` (no filter).
    #[serde(default)]
    pub filter_pins: Pins,
    /// File descriptors onto the filter's maps and programs for other tasks:
    /// `refused by the kernel` (the `bpf_map`/`bpf_prog` security hooks:
    /// from a pin, by id or taken from the daemon), `periodic check only`
    /// (the cgroup-device fallback: a map written through such an fd is put
    /// back within 2 s) or `none` (no filter).
    #[serde(default)]
    pub map_fds: MapFds,
    /// `protected`, `degraded` (open-time only), `off` (disabled by an
    /// administrator) or `unprotected` (no filter backend could load:
    /// `filter_reason` says why; `asmguardctl status` then exits with 7).
    pub protection: Protection,
    /// How to turn the BPF LSM on, when the kernel has it but it is off and
    /// the filter lacks full coverage: `{"lsm_param": "lsm=...,bpf"}`, the
    /// kernel command-line argument to boot with; absent otherwise. It was
    /// the sentence `asmguardctl status`'s `hint:` line shows (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_lsm_hint: Option<asmguard_filter_types::LsmHint>,
    /// The exclusive claims the daemon holds on managed disks: the kernel's
    /// consumers (dm, md, mount, swap ...) get EBUSY on them. (Each was a
    /// sentence: `LABEL MAJ:MIN`.)
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// Where the claims outlive a restart: `systemd fd store`, or `none
    /// (re-taken on start)`.
    #[serde(default)]
    pub claims_kept: ClaimsKept,
    /// The last time taking the claims of a disk newly labelled or plugged
    /// in took long: the disks waited for, how long, whether all were taken;
    /// absent when it never did. It was a sentence (`the exclusive claim of
    /// LABEL MAJ:MIN took N ms to take`), empty when it never did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_slow: Option<ClaimsSlow>,
    /// The configured containers as the filter resolved them (`[[container]]`).
    #[serde(default)]
    pub containers: Vec<ContainerStatus>,
    /// Whether the filter judges tasks by their container: false on the
    /// cgroup-device fallback's uid/gid-only variant (5.10), which cannot read
    /// a task's cgroup (container rules are then not enforced).
    #[serde(default)]
    pub containers_enforced: bool,
    /// Device nodes made for containers (`/dev/asmguard/containers`).
    #[serde(default)]
    pub container_nodes: usize,
    /// Containers (or labels of theirs) that get no device node, and why.
    #[serde(default)]
    pub not_presented: Vec<NotPresented>,
    /// Configuration keys whose value in the file differs from the one in
    /// force and that take effect only when the daemon restarts (SIGHUP
    /// applied every other key): the key, the value in force, the file's.
    /// (Each was a sentence: `section.key = in force -> in the file`.)
    #[serde(default)]
    pub restart_needed: Vec<RestartNeeded>,
    /// The disks a reclaim runs on and what their fence refuses on this
    /// backend (no disks: no reclaim runs).
    #[serde(default)]
    pub reclaim_fence: ReclaimFence,
    /// Protected disks a process still writes to through a mapping made
    /// before protection, one per (disk, process); `asmguardctl status` then
    /// exits with 7. One goes when the process (or its mapping) does.
    /// (Each was a sentence: `DATA1 mapped shared-writable by pid 1234 (dd)
    /// since before protection`.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed: Vec<OpenedBefore>,
    /// Descriptors open for writing on a protected disk since before its
    /// protection: the filter judges each write (`file_permission`), so they
    /// do not make the disk exposed. (Each was a sentence: `DATA1 writer open
    /// since before protection: pid 1234 (sh) fd 5 on /dev/sdb (its writes
    /// are refused)`.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writers_before: Vec<OpenedBefore>,
    /// Loop devices set up over a protected disk before its protection: they
    /// joined the disk's devices, so they do not make it exposed. (Each was a
    /// sentence: `loop0 over DATA1 (backing file /dev/sdb), set up before
    /// protection: its writes are judged as the disk's`.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loops_before: Vec<LoopBefore>,
}

/// A rule of who may write (`status`'s `allow_rules`), as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AllowRule {
    /// `filter.allow_users`: any process of these users.
    Users { users: Vec<String> },
    /// `filter.allow_groups`: any process in these groups.
    Groups { groups: Vec<String> },
    /// One of `filter.allow_executables`: any process running it.
    Executable { path: String },
    /// A `[[rule]]`: a process that meets every part it has (one of its
    /// users or groups, one of its executables, units, cgroups).
    Rule {
        name: String,
        #[serde(default)]
        users: Vec<String>,
        #[serde(default)]
        groups: Vec<String>,
        #[serde(default)]
        executables: Vec<String>,
        #[serde(default)]
        units: Vec<String>,
        #[serde(default)]
        cgroups: Vec<String>,
    },
    /// The Oracle homes' binaries of one owner, run by that owner.
    OracleHomes { uid: u32, executables: Vec<String> },
    /// The daemon's own process (label and reclaim writes).
    Daemon,
}

/// What to know about the rules (`status`'s `allow_notes`; the
/// configuration check says them too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleNote {
    /// `filter.allow_users`/`allow_groups` are set: any process of them may
    /// write, a login shell's `dd` too.
    AnyProcessOfUsers,
    /// `filter.allow_executables` is set: an executable alone can be borrowed.
    ExecutablesAlone,
    /// A `[[rule]]` of users and groups alone: any process of them may write.
    RuleUsersAlone { rule: String },
    /// A `[[rule]]` of executables alone: they can be borrowed.
    RuleExecutablesAlone { rule: String },
    /// This backend knows callers by uid and gid only.
    IdsOnly,
    /// What could not be resolved (a name, an executable, a home) and why.
    Unresolved { problem: String },
}

impl std::fmt::Display for RuleNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleNote::AnyProcessOfUsers => f.write_str(
                "filter.allow_users/allow_groups: any process of those users and groups may write, \
                 a login shell's dd onto the wrong disk too; to let only the database write, use \
                 oracle_homes (the homes' own binaries run by their owner) or [[rule]]s with \
                 executables or units, then empty allow_users and allow_groups",
            ),
            RuleNote::ExecutablesAlone => f.write_str(
                "filter.allow_executables: an executable alone can be borrowed (started under \
                 ptrace or with LD_PRELOAD by anyone who can open the disk): pair it with users \
                 or a unit in a [[rule]]",
            ),
            RuleNote::RuleUsersAlone { rule } => write!(
                f,
                "rule {rule}: users and groups alone: any process of them may write"
            ),
            RuleNote::RuleExecutablesAlone { rule } => write!(
                f,
                "rule {rule}: executables alone can be borrowed (ptrace, LD_PRELOAD): add users or a unit"
            ),
            RuleNote::IdsOnly => f.write_str(
                "this backend knows callers by uid and gid only: each rule is judged by its users \
                 and groups alone (executables and places cannot be read), and a rule without \
                 users or groups does not apply",
            ),
            RuleNote::Unresolved { problem } => f.write_str(problem),
        }
    }
}

/// An Oracle home found (`status`'s and `lsdsk`'s `oracle_homes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OracleHome {
    /// `grid` (Grid Infrastructure with ASM) or `database`.
    pub kind: String,
    pub path: String,
    /// Its binaries that may write, each run by its owner.
    pub binaries: Vec<OracleBinary>,
}

/// An Oracle binary that may write when its owner runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OracleBinary {
    pub path: String,
    /// The owner: the uid the process must run as.
    pub uid: u32,
}

/// `grid home /u01/app/19c/grid: oracle (uid 54331), ocssd.bin (uid 54331),
/// crsd.bin (uid 0)`: `status`'s row and the daemon's log line.
impl std::fmt::Display for OracleHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} home {}: ", self.kind, self.path)?;
        if self.binaries.is_empty() {
            return f.write_str("no binary allowed");
        }
        for (i, b) in self.binaries.iter().enumerate() {
            let name = b.path.rsplit('/').next().unwrap_or(&b.path);
            write!(f, "{}{name} (uid {})", if i > 0 { ", " } else { "" }, b.uid)?;
        }
        Ok(())
    }
}

impl OracleBinary {
    /// The line of a binary replaced but still running (`oracle_retired`).
    pub fn retired_text(&self) -> String {
        format!(
            "replaced but still running (allowed until its processes exit): {} (uid {})",
            self.path, self.uid
        )
    }
}

/// A configuration key the file changed that takes effect only when the
/// daemon restarts (`status`'s `restart_needed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartNeeded {
    /// `section.key` (`metrics.listen`).
    pub key: String,
    /// The value in force, as the daemon prints it (a string in quotes).
    pub in_force: String,
    /// The value in the file, likewise.
    pub in_file: String,
}

/// An exclusive claim the daemon holds (`status`'s `claims`), or one waited
/// for (`claims_slow`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Claim {
    /// The disk's label.
    pub label: String,
    /// The claimed device's major and minor.
    pub major: u32,
    pub minor: u32,
}

/// The majors the filter's programs look devices up under (`status`'s
/// `filter_majors`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Majors {
    /// Block majors (`sd` is 8, NVMe 259).
    pub blk: Vec<u32>,
    /// Character majors (`sg` is 21).
    pub chr: Vec<u32>,
    /// Why the kernel's map could not be read (the lists are then empty);
    /// absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// A process's mapping or descriptor of a protected disk made before its
/// protection (`status`'s `exposed`, `writers_before`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedBefore {
    /// The disk's label.
    pub label: String,
    pub pid: u32,
    /// The process's name (`comm`).
    pub comm: String,
    /// The descriptor (a mapping: the one it was made from, when still open).
    pub fd: u32,
    /// The node it was opened through.
    pub path: String,
    /// `major:minor`.
    pub device: KernelDev,
}

/// A loop device set up over a protected disk before its protection
/// (`status`'s `loops_before`; the daemon's record of one, too).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LoopBefore {
    /// The disk's label.
    pub label: String,
    /// Its kernel name (`loop0`).
    pub name: String,
    /// `major:minor`.
    pub device: KernelDev,
    /// What it reads and writes (`loop/backing_file`).
    pub backing: String,
    /// Set up read-only.
    pub read_only: bool,
}

/// `loop0 over DATA1 (backing file /dev/sdb), set up before protection: its
/// writes are judged as the disk's`: the journal's, `status`' and the
/// event's words.
impl std::fmt::Display for LoopBefore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} over {} (backing file {}{}), set up before protection: its writes are judged \
             as the disk's",
            self.name,
            self.label,
            self.backing,
            if self.read_only { ", read-only" } else { "" }
        )
    }
}

/// `status`'s `bpf_lsm`: whether `bpf` is an active LSM, from the kernel's
/// list of active LSMs (`/sys/kernel/security/lsm`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BpfLsm {
    /// `null` when the list cannot be read (securityfs not mounted).
    pub active: Option<bool>,
    /// The active LSMs in the kernel's order; empty when unknown.
    #[serde(default)]
    pub lsm: Vec<String>,
}

/// The filter's pinned maps and links (`status`'s `filter_pins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pins {
    /// No other task may get them by id, write the maps or detach the links.
    Guarded,
    /// Compared every 2 s with what the daemon wrote; what another process
    /// changed is put back.
    Watched,
    /// No filter.
    #[default]
    #[serde(alias = "")]
    None,
}

/// File descriptors onto the filter's maps and programs for other tasks
/// (`status`'s `map_fds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MapFds {
    /// The `bpf_map`/`bpf_prog` security hooks refuse them (from a pin, by
    /// id or taken from the daemon).
    #[serde(rename = "refused by the kernel")]
    Refused,
    /// The cgroup-device fallback: a map written through such an fd is put
    /// back within 2 s.
    #[serde(rename = "periodic check only")]
    PeriodicCheck,
    /// No filter.
    #[default]
    #[serde(rename = "none", alias = "")]
    None,
}

/// One `[[container]]` as the filter resolved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStatus {
    pub name: String,
    /// The cgroups its patterns match now (paths below the cgroup2 mount).
    pub cgroups: Vec<String>,
    /// Who in it may write: `"all"`, or its users and groups with host ids.
    pub allow: ContainerAllow,
    /// Why a configured user or group is not allowed (one line each).
    pub problems: Vec<String>,
}

impl ContainerStatus {
    /// One line: its cgroups, who may write, the problems.
    pub fn summary(&self) -> String {
        let cgroups = if self.cgroups.is_empty() {
            "no cgroup (not running)".to_string()
        } else {
            format!("cgroups {}", self.cgroups.join(", "))
        };
        let allow = match &self.allow {
            ContainerAllow::All(_) => "anything in it may write".to_string(),
            ContainerAllow::Ids { users, groups } => {
                let mut w: Vec<String> = users
                    .iter()
                    .map(|u| format!("user {} (host uid {})", u.name, u.host_uid))
                    .collect();
                w.extend(
                    groups
                        .iter()
                        .map(|g| format!("group {} (host gid {})", g.name, g.host_gid)),
                );
                if w.is_empty() {
                    "nobody in it may write".to_string()
                } else {
                    format!("may write: {}", w.join(", "))
                }
            }
        };
        let mut s = format!("container {}: {cgroups}; {allow}", self.name);
        for p in &self.problems {
            s.push_str("; ");
            s.push_str(p);
        }
        s
    }
}

/// Who in a container may write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContainerAllow {
    /// `"all"`: anything in the container.
    All(String),
    /// Its users and groups (as the container names them) and their host ids.
    Ids {
        users: Vec<ContainerUser>,
        groups: Vec<ContainerGroup>,
    },
}

/// A container's user and its host uid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerUser {
    pub name: String,
    pub host_uid: u32,
}

/// A container's group and its host gid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerGroup {
    pub name: String,
    pub host_gid: u32,
}

impl StatusResult {
    /// Whether no filter protects the disks although none was disabled on purpose.
    pub fn unprotected(&self) -> bool {
        self.protection == Protection::Unprotected
    }

    /// Whether some protected disk is still written through a mapping made
    /// before protection.
    pub fn exposed(&self) -> bool {
        !self.exposed.is_empty()
    }
}

/// Where the exclusive claims outlive a daemon restart (`status`'s
/// `claims_kept`, with the words it had as a string).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimsKept {
    /// In systemd's file-descriptor store: a restart keeps them.
    #[serde(rename = "systemd fd store")]
    FdStore,
    /// Nowhere (no `NOTIFY_SOCKET`): re-taken when the daemon starts.
    #[default]
    #[serde(
        rename = "none (no NOTIFY_SOCKET: re-taken on start)",
        alias = "none (re-taken on start)",
        alias = ""
    )]
    OnStart,
}

/// `status`'s `events`: where device events come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum EventSource {
    /// udevd's events, after its rules.
    Udev,
    /// The kernel's uevents: no udevd, or (`udev_failed`) udevd runs but
    /// listening to it failed.
    Kernel {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        udev_failed: Option<String>,
    },
    /// None: device changes need `asmguardctl scan`.
    None { reason: String },
}

/// `udev`, `kernel uevents (no udevd)`, `none (why): run ...`: the words
/// `asmguardctl status` and the daemon's log show.
impl std::fmt::Display for EventSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventSource::Udev => f.write_str("udev"),
            EventSource::Kernel { udev_failed: None } => f.write_str("kernel uevents (no udevd)"),
            EventSource::Kernel {
                udev_failed: Some(e),
            } => write!(
                f,
                "kernel uevents (udevd runs, but its monitor failed: {e})"
            ),
            EventSource::None { reason } => write!(
                f,
                "none ({reason}): run `asmguardctl scan` after device changes"
            ),
        }
    }
}

/// `status`'s `metrics`: the Prometheus endpoint and the I/O latency tracer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetricsEndpoint {
    /// `http://ADDR/metrics` where it listens; the configured address where
    /// it could not; absent before it was served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Whether it serves.
    #[serde(flatten)]
    pub state: EndpointState,
    /// The I/O latency tracer that feeds its histograms.
    pub tracer: TracerState,
}

/// Whether the metrics endpoint serves (`state`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EndpointState {
    /// Not started yet.
    #[default]
    NotYet,
    /// Listening and accepting connections.
    Serving,
    /// Listening, but accepting fails now (the listener retries).
    Failing { error: String },
    /// It could not listen (a bad address, the port taken).
    NotServed { error: String },
}

/// The I/O latency tracer (`asmguard-metrics`' block tracepoint programs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TracerState {
    /// Attached: `attach` is `tp_btf` or `raw_tp`; `stamps` whose issue
    /// times it uses.
    Attached {
        attach: String,
        stamps: TracerStamps,
    },
    /// Not loaded: the latency histograms are off.
    Off { reason: String },
}

/// Whose issue times the latency tracer uses (`by`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum TracerStamps {
    /// The kernel's, on queues with QUEUE_FLAG_STATS (bit `stats_bit`, read
    /// from `bit_from`); `verified_on`: the disk whose probe read the kernel
    /// stamped (absent: no probe read reached a queue with stats).
    Kernel {
        stats_bit: u32,
        bit_from: StatsBitFrom,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verified_on: Option<String>,
    },
    /// Its own, and why.
    Own { reason: String },
}

/// Where the QUEUE_FLAG_STATS bit number came from (`from`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum StatsBitFrom {
    /// The kernel's BTF.
    Btf,
    /// The per-kernel table, for the kernel `lines` named.
    Table { lines: String },
    /// The configuration.
    Configuration,
}

/// `kernel stamps (QUEUE_FLAG_STATS = N from ..., verified on sdb)` or `own
/// stamps (why)`.
impl std::fmt::Display for TracerStamps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TracerStamps::Kernel {
                stats_bit,
                bit_from,
                verified_on,
            } => {
                write!(
                    f,
                    "kernel stamps (QUEUE_FLAG_STATS = {stats_bit} from {bit_from}, "
                )?;
                match verified_on {
                    Some(disk) => write!(f, "verified on {disk})"),
                    None => f.write_str("not verified: no probe read reached a queue with stats)"),
                }
            }
            TracerStamps::Own { reason } => write!(f, "own stamps ({reason})"),
        }
    }
}

/// `the kernel's BTF`, `the table for Linux 5.4-6.11`, `the configuration`.
impl std::fmt::Display for StatsBitFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatsBitFrom::Btf => f.write_str("the kernel's BTF"),
            StatsBitFrom::Table { lines } => write!(f, "the table for Linux {lines}"),
            StatsBitFrom::Configuration => f.write_str("the configuration"),
        }
    }
}

impl Default for TracerState {
    fn default() -> TracerState {
        TracerState::Off {
            reason: "unknown".into(),
        }
    }
}

/// `block tracepoints (tp_btf, ...)` or `off (why)`.
impl std::fmt::Display for TracerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TracerState::Attached { attach, stamps } => {
                write!(f, "block tracepoints ({attach}, {stamps})")
            }
            TracerState::Off { reason } => write!(f, "off ({reason})"),
        }
    }
}

/// `status`'s `claims_slow`: the last time taking the exclusive claims took
/// long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimsSlow {
    /// The disks waited for: label, major, minor (each was `LABEL MAJ:MIN`).
    pub disks: Vec<Claim>,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// Whether every claim was taken in the end.
    pub all_taken: bool,
}

/// `status`'s reclaim fence: the disks a reclaim runs on (none: no reclaim
/// runs) and what their fence refuses on the filter in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimFence {
    pub disks: Vec<String>,
    /// `None` while no disk is fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuses: Option<FenceRefuses>,
}

/// What a reclaim's fence refuses, by what the filter in force sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceRefuses {
    /// Every write-open, write, write-class ioctl and shared-writable mapping
    /// by any process but asmguardd, allow rules included (full coverage).
    AllWrites,
    /// Write-opens by any process but asmguardd, allow rules included (the
    /// cgroup-device fallback: opens only).
    OpensButDaemon,
    /// Write-opens by processes no allow rule names (the fallback judging by
    /// ids: asmguardd cannot be told from an allowed user).
    OpensNotAllowed,
    /// Nothing: no filter is loaded.
    Nothing,
}

/// The answer to `filter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterResult {
    pub action: FilterAction,
    /// The labels concerned.
    pub labels: Vec<String>,
    /// The backend afterwards (`none` once disabled).
    pub backend: asmguard_filter_types::BackendName,
}

/// One write the filter denied (mode `enforce`) or logged and allowed
/// (`audit`): the guard's decoded [`Denial`] (its fields flattened: `pid`,
/// `uid`, `euid`, `egid`, `comm`, `exe`, `device` (`major:minor`),
/// `device_type`, `hook`, `operation`, `op`, `command`, `mode`) and what the
/// daemon adds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FilterEventInfo {
    pub seq: u64,
    /// When the daemon received it (ms since the epoch).
    pub time_ms: u64,
    #[serde(flatten)]
    pub denial: Denial,
    pub label: String,
    /// The configured container the writer was in (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container: String,
    /// Set on an event the daemon noticed rather than one the kernel
    /// refused or audited (`{"kind":"exposed"}`, ...). It was a sentence
    /// (`note`: `exposed`, `pin replaced: WHAT`, `loop before protection:
    /// ...`) that `asmguardctl` matched as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noticed: Option<Noticed>,
}

/// Written in the order `events --json` has always had (one line per event,
/// which scripts read with `grep`): the process, the device, the label, the
/// hook, the operation and the mode, then what is newer (`container`,
/// `noticed`, `op`, `command`, each only when it says something).
impl Serialize for FilterEventInfo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let d = &self.denial;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("time_ms", &self.time_ms)?;
        m.serialize_entry("pid", &d.pid)?;
        m.serialize_entry("uid", &d.uid)?;
        m.serialize_entry("euid", &d.euid)?;
        m.serialize_entry("egid", &d.egid)?;
        m.serialize_entry("comm", &d.comm)?;
        m.serialize_entry("exe", &d.exe)?;
        m.serialize_entry("device", &d.device)?;
        m.serialize_entry("device_type", &d.device_type)?;
        m.serialize_entry("label", &self.label)?;
        m.serialize_entry("hook", &d.operation.hook)?;
        m.serialize_entry("operation", &d.operation.to_string())?;
        m.serialize_entry("mode", &d.mode)?;
        if !self.container.is_empty() {
            m.serialize_entry("container", &self.container)?;
        }
        if let Some(n) = &self.noticed {
            m.serialize_entry("noticed", n)?;
        }
        m.serialize_entry("op", &d.operation.code)?;
        if let Some(c) = &d.operation.command {
            m.serialize_entry("command", c)?;
        }
        m.end()
    }
}

/// What the daemon noticed itself (an event no hook of the kernel raised).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Noticed {
    /// A protected disk is mapped shared-writable since before its
    /// protection (the event's process and device).
    Exposed,
    /// That mapping, or its process, is gone.
    ExposureEnded,
    /// A loop device set up over the protected disk before its protection:
    /// its writes are judged as the disk's.
    LoopBefore { device: LoopBefore },
    /// That loop device is detached, or the disk is no longer protected.
    LoopGone { device: LoopBefore },
    /// A pinned link of the filter, found at a start not to be the
    /// daemon's own: the pin and what was there instead (`pin`, `found`;
    /// worded by its `Display`: `PIN: what was found`).
    PinReplaced(ReplacedPin),
}

/// The answer to `events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsResult {
    pub events: Vec<FilterEventInfo>,
    /// The highest sequence number handed out so far (ask for `after` it next).
    pub last_seq: u64,
}

#[cfg(test)]
mod tests {

    /// `Op::serve` answers each operation with the method its row names,
    /// its arguments and the caller passed through, the answer as JSON; an
    /// error is the method's own.
    #[test]
    fn serve_routes_each_row_to_its_method() {
        use super::*;
        struct Echo;
        impl serve::Ping for Echo {
            fn ping(&self, c: &str) -> Result<impl Serialize, ErrorBody> {
                Ok(format!("ping {c}"))
            }
        }
        impl serve::Lsdsk for Echo {
            fn lsdsk(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok("lsdsk")
            }
        }
        impl serve::Scan for Echo {
            fn scan(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok("scan")
            }
        }
        impl serve::Status for Echo {
            fn status(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok("status")
            }
        }
        impl serve::Iostat for Echo {
            fn iostat(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok("iostat")
            }
        }
        impl serve::Label for Echo {
            fn label(&self, a: &LabelArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok(format!("label {} {}", a.label, a.device))
            }
        }
        impl serve::Unlabel for Echo {
            fn unlabel(&self, a: &UnlabelArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok(format!("unlabel {}", a.label))
            }
        }
        impl serve::Rename for Echo {
            fn rename(&self, a: &RenameArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok(format!("rename {} {}", a.old, a.new))
            }
        }
        impl serve::Filter for Echo {
            fn filter(&self, _: &FilterArgs, c: &str) -> Result<impl Serialize, ErrorBody> {
                Err::<(), _>(ErrorBody::new(
                    ErrorCode::PermissionDenied,
                    format!("no {c}"),
                ))
            }
        }
        impl serve::Events for Echo {
            fn events(&self, a: &EventsArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok(a.after)
            }
        }
        impl serve::Reclaim for Echo {
            fn reclaim(&self, _: &ReclaimArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
                Ok("reclaim")
            }
        }
        // the whole protocol: every row's trait
        fn serves_all<S: Serve>(_: &S) {}
        serves_all(&Echo);
        let serve = |line: &str| {
            let req = parse_request(line.as_bytes()).unwrap();
            req.op.serve(&Echo, "uid 0 pid 1")
        };
        assert_eq!(
            serve(r#"{"version":1,"id":1,"op":"ping"}"#).unwrap(),
            "ping uid 0 pid 1"
        );
        for name in ["lsdsk", "scan", "status", "iostat"] {
            let v = serve(&format!(r#"{{"version":1,"id":1,"op":"{name}"}}"#)).unwrap();
            assert_eq!(v, name);
        }
        assert_eq!(
            serve(
                r#"{"version":1,"id":1,"op":"label","args":{"label":"DATA1","device":"/dev/sdb"}}"#
            )
            .unwrap(),
            "label DATA1 /dev/sdb"
        );
        assert_eq!(
            serve(r#"{"version":1,"id":1,"op":"events","args":{"after":7}}"#).unwrap(),
            7
        );
        let e =
            serve(r#"{"version":1,"id":1,"op":"filter","args":{"action":"enable"}}"#).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::PermissionDenied, "no uid 0 pid 1")
        );
    }
    /// The typed words of `status` keep the JSON they had as strings (the
    /// labs, the Ansible role and scripts read them); an empty word from an
    /// older daemon reads as none.
    #[test]
    fn typed_status_words_keep_their_json() {
        use super::{MapFds, Pins};
        use asmguard_filter_types::BackendName;
        let w = |v: serde_json::Value| v.as_str().unwrap().to_string();
        for (p, word) in [
            (Pins::Guarded, "guarded"),
            (Pins::Watched, "watched"),
            (Pins::None, "none"),
        ] {
            assert_eq!(w(serde_json::to_value(p).unwrap()), word);
            assert_eq!(serde_json::from_value::<Pins>(word.into()).unwrap(), p);
        }
        for (m, word) in [
            (MapFds::Refused, "refused by the kernel"),
            (MapFds::PeriodicCheck, "periodic check only"),
            (MapFds::None, "none"),
        ] {
            assert_eq!(w(serde_json::to_value(m).unwrap()), word);
            assert_eq!(serde_json::from_value::<MapFds>(word.into()).unwrap(), m);
        }
        for (b, word) in [
            (BackendName::Lsm, "lsm"),
            (BackendName::FmodRet, "fmod_ret"),
            (BackendName::CgroupDevice, "cgroup_device"),
            (BackendName::None, "none"),
        ] {
            assert_eq!(w(serde_json::to_value(b).unwrap()), word);
            assert_eq!(b.to_string(), word);
        }
        assert_eq!(
            serde_json::from_value::<Pins>("".into()).unwrap(),
            Pins::None
        );
        assert_eq!(
            serde_json::from_value::<MapFds>("".into()).unwrap(),
            MapFds::None
        );
    }

    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let r = Request {
            id: 3,
            op: Op::Label(LabelArgs {
                label: "DATA1".into(),
                device: "/dev/loop0".into(),
                force: false,
                migrate: true,
            }),
        };
        assert_eq!(parse_request(r.to_line().as_bytes()).unwrap(), r);
        let ping = Request {
            id: 1,
            op: Op::Ping,
        };
        assert_eq!(parse_request(ping.to_line().as_bytes()).unwrap(), ping);
        let code = |s: &str| parse_request(s.as_bytes()).unwrap_err().1.code;
        assert_eq!(code("{"), ErrorCode::BadRequest);
        assert_eq!(code("[]"), ErrorCode::BadRequest);
        assert_eq!(
            code(r#"{"version":2,"op":"ping"}"#),
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            code(r#"{"version":1,"op":"format_c"}"#),
            ErrorCode::UnknownOp
        );
        assert_eq!(
            code(r#"{"version":1,"op":"label","args":{"label":"X"}}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(
                r#"{"version":1,"op":"label","args":{"label":"X","device":"/dev/x","wipe":true}}"#
            ),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"version":1,"op":"lsdsk","args":[1]}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"version":1,"id":-1,"op":"lsdsk"}"#),
            ErrorCode::BadRequest
        );
        // The limit counts the newline: MAX_REQUEST_LEN bytes before it is one too many.
        let big = vec![b' '; MAX_REQUEST_LEN];
        assert_eq!(parse_request(&big).unwrap_err().1.code, ErrorCode::TooLarge);
        let fits = vec![b' '; MAX_REQUEST_LEN - 1];
        assert_ne!(
            parse_request(&fits).unwrap_err().1.code,
            ErrorCode::TooLarge
        );
        let f = Request {
            id: 4,
            op: Op::Filter(FilterArgs {
                action: FilterAction::Audit,
                label: Some("DATA1".into()),
            }),
        };
        assert_eq!(parse_request(f.to_line().as_bytes()).unwrap(), f);
        assert_eq!(f.op.access(), Access::Write);
        assert_eq!(
            code(r#"{"version":1,"op":"filter","args":{"action":"off"}}"#),
            ErrorCode::BadRequest
        );
        let e = Request {
            id: 5,
            op: Op::Events(EventsArgs { after: 7 }),
        };
        assert_eq!(parse_request(e.to_line().as_bytes()).unwrap(), e);
        assert_eq!(e.op.access(), Access::Read);
        let (id, _) = parse_request(br#"{"version":1,"id":9,"op":"nope"}"#).unwrap_err();
        assert_eq!(id, 9);
    }

    #[test]
    fn reclaim_requests() {
        let r = Request {
            id: 6,
            op: Op::Reclaim(ReclaimArgs {
                labels: vec!["DATA1".into()],
                diskgroup: None,
                dry_run: true,
                rate_bytes: 1 << 20,
                method: ReclaimMethod::Zeroout,
                watch_seconds: 0.5,
                above_size: true,
                p99_multiple: 3.0,
            }),
        };
        assert_eq!(parse_request(r.to_line().as_bytes()).unwrap(), r);
        assert_eq!(r.op.access(), Access::Write);
        let code = |s: &str| parse_request(s.as_bytes()).unwrap_err().1.code;
        assert_eq!(
            code(r#"{"version":1,"op":"reclaim","args":{"labels":["A"],"method":"trim"}}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"version":1,"op":"reclaim","args":{}}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"version":1,"op":"reclaim","args":{"labels":["A"],"diskgroup":"D"}}"#),
            ErrorCode::BadRequest
        );
        let ok =
            parse_request(br#"{"version":1,"op":"reclaim","args":{"diskgroup":"DATA"}}"#).unwrap();
        match ok.op {
            Op::Reclaim(a) => {
                assert_eq!(a.method, ReclaimMethod::Discard);
                assert_eq!(a.watch_seconds, 7.0);
            }
            _ => panic!(),
        }
        let p = ProgressLine {
            version: VERSION,
            id: 6,
            progress: ReclaimProgress {
                phase: "reclaiming".into(),
                label: "DATA1".into(),
                done_bytes: 1,
                total_bytes: 2,
                percent: 50.0,
                rate_bytes_per_sec: 1.0,
                eta_seconds: 1.0,
                rate_limit_bytes_per_sec: 2.0,
                rate_note: "halved".into(),
            },
        };
        let line = serde_json::to_string(&p).unwrap();
        // A progress line has no "ok": it can never be taken for the final response.
        assert!(
            serde_json::from_str::<Response>(&line).is_err(),
            "a progress line parsed as a response: {line}"
        );
        assert_eq!(serde_json::from_str::<ProgressLine>(&line).unwrap(), p);
    }

    #[test]
    fn every_op_of_the_table_is_known_and_named_alike() {
        for (name, _) in Op::NAMES {
            let line = format!("{{\"version\":{VERSION},\"id\":3,\"op\":\"{name}\"}}");
            match parse_request(line.as_bytes()) {
                Ok(r) => assert_eq!(r.op.name(), *name),
                Err((id, e)) => {
                    // ops with required arguments: refused for the arguments only
                    assert_eq!((id, e.code), (3, ErrorCode::BadRequest), "{name}: {e:?}");
                    assert!(e.message.contains(*name), "{e:?}");
                }
            }
        }
        let (id, e) = parse_request(b"{\"version\":1,\"id\":4,\"op\":\"nope\"}").unwrap_err();
        assert_eq!((id, e.code), (4, ErrorCode::UnknownOp));
        for (name, _) in Op::NAMES {
            assert!(e.message.contains(name), "{}", e.message);
        }
        let (id, e) =
            parse_request(b"{\"version\":1,\"id\":5,\"op\":\"ping\",\"x\":1}").unwrap_err();
        assert_eq!((id, e.code), (5, ErrorCode::BadRequest));
        assert!(e.message.contains("unknown field `x`"), "{}", e.message);
    }

    /// The request lines are what existing clients send: the names stay.
    #[test]
    fn request_lines_keep_their_shape() {
        let ping = Request {
            id: 1,
            op: Op::Ping,
        };
        assert_eq!(ping.to_line(), r#"{"id":1,"op":"ping","version":1}"#);
        let ev = Request {
            id: 2,
            op: Op::Events(EventsArgs { after: 3 }),
        };
        assert_eq!(
            ev.to_line(),
            r#"{"args":{"after":3},"id":2,"op":"events","version":1}"#
        );
        // an operation with defaulted arguments needs none; `{}` and null
        // are no arguments
        for line in [
            r#"{"version":1,"op":"events"}"#,
            r#"{"version":1,"op":"events","args":{}}"#,
        ] {
            let r = parse_request(line.as_bytes()).unwrap();
            assert_eq!(r.op, Op::Events(EventsArgs { after: 0 }), "{line}");
        }
        for line in [
            r#"{"version":1,"op":"status","args":{}}"#,
            r#"{"version":1,"op":"status","args":null}"#,
        ] {
            assert_eq!(parse_request(line.as_bytes()).unwrap().op, Op::Status);
        }
        let (_, e) = parse_request(br#"{"version":1,"op":"status","args":{"a":1}}"#).unwrap_err();
        assert_eq!(e.message, "`status` takes no arguments");
        let (_, e) =
            parse_request(br#"{"version":1,"op":"rename","args":{"old":"A"}}"#).unwrap_err();
        assert_eq!(e.message, "bad arguments for `rename`: missing field `new`");
        // the table and the enum agree on names and access
        assert_eq!(Op::NAMES.len(), 11);
        assert_eq!(Op::Scan.access(), Access::Read);
        assert_eq!(Op::Scan.name(), "scan");
    }

    #[test]
    fn response_lines() {
        let ok = Response::ok(4, serde_json::json!({"a":1}));
        let back: Response = serde_json::from_str(&ok.to_line()).unwrap();
        assert_eq!(back.into_result().unwrap(), serde_json::json!({"a":1}));
        let e = Response::err(5, ErrorBody::new(ErrorCode::Busy, "busy"));
        let line = e.to_line();
        assert!(line.contains(r#""code":"busy""#), "{line}");
        let back: Response = serde_json::from_str(&line).unwrap();
        assert_eq!(back.into_result().unwrap_err().code, ErrorCode::Busy);
    }
}

/// The `--json` documents' field names are an interface: scripts read them.
/// Each answer is read from a literal document that has every field, written
/// back, and must come out with exactly the same names (a renamed, dropped or
/// added field fails here), nested documents included.
#[cfg(test)]
mod stamps_words {
    use super::*;

    /// The tracer's stamps are worded here alone: the daemon's journal, the
    /// `asmguard-iolat` banner and `asmguardctl status` all print this.
    #[test]
    fn the_stamps_say_source_and_verification() {
        let kernel = |bit_from, verified_on: Option<&str>| TracerStamps::Kernel {
            stats_bit: 20,
            bit_from,
            verified_on: verified_on.map(Into::into),
        };
        for (s, words) in [
            (
                kernel(
                    StatsBitFrom::Table {
                        lines: "5.4-6.11".into(),
                    },
                    Some("nvme0n1"),
                ),
                "kernel stamps (QUEUE_FLAG_STATS = 20 from the table for Linux 5.4-6.11, \
                 verified on nvme0n1)",
            ),
            (
                kernel(StatsBitFrom::Btf, None),
                "kernel stamps (QUEUE_FLAG_STATS = 20 from the kernel's BTF, not verified: no \
                 probe read reached a queue with stats)",
            ),
            (
                kernel(StatsBitFrom::Configuration, Some("vda")),
                "kernel stamps (QUEUE_FLAG_STATS = 20 from the configuration, verified on vda)",
            ),
            (
                TracerStamps::Own {
                    reason: "turned off".into(),
                },
                "own stamps (turned off)",
            ),
        ] {
            assert_eq!(s.to_string(), words);
        }
    }
}

#[cfg(test)]
mod homes_lines {
    use super::*;

    /// The Oracle homes' lines `status` and the daemon's log write (the
    /// homes crate wrote them before: one place now).
    #[test]
    fn a_home_and_a_retired_binary_as_lines() {
        let b = |p: &str, uid| OracleBinary {
            path: p.into(),
            uid,
        };
        let grid = OracleHome {
            kind: "grid".into(),
            path: "/g".into(),
            binaries: vec![
                b("/g/bin/oracle", 54331),
                b("/g/bin/ocssd.bin", 54331),
                b("/g/bin/crsd.bin", 0),
            ],
        };
        assert_eq!(
            grid.to_string(),
            "grid home /g: oracle (uid 54331), ocssd.bin (uid 54331), crsd.bin (uid 0)"
        );
        let db = OracleHome {
            kind: "database".into(),
            path: "/u01/db".into(),
            binaries: vec![],
        };
        assert_eq!(db.to_string(), "database home /u01/db: no binary allowed");
        assert_eq!(
            b("/u01/db/bin/oracle", 54321).retired_text(),
            "replaced but still running (allowed until its processes exit): \
             /u01/db/bin/oracle (uid 54321)"
        );
    }
}

#[cfg(test)]
mod json_names {
    use super::*;
    use serde::de::DeserializeOwned;

    fn keys(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let path = format!("{at}.{k}");
                    out.push(path.clone());
                    keys(x, &path, out);
                }
            }
            Value::Array(a) => {
                for x in a {
                    keys(x, &format!("{at}[]"), out);
                }
            }
            _ => {}
        }
    }

    fn pinned<T: Serialize + DeserializeOwned>(doc: &str) {
        let want: Value = serde_json::from_str(doc).unwrap();
        let typed: T = serde_json::from_value(want.clone()).unwrap();
        let got = serde_json::to_value(&typed).unwrap();
        let (mut a, mut b) = (vec![], vec![]);
        keys(&want, "", &mut a);
        keys(&got, "", &mut b);
        a.sort();
        a.dedup();
        b.sort();
        b.dedup();
        assert_eq!(b, a, "{}", std::any::type_name::<T>());
        assert_eq!(got, want, "values round-trip");
    }

    /// `events --json` prints one line per event, which scripts and the
    /// labs read with `grep`: its fields keep the order they always had (the
    /// label before the hook, the operation right before the mode), and
    /// what is newer comes last.
    #[test]
    fn an_event_line_keeps_its_field_order() {
        for line in [
            r#"{"seq":1,"time_ms":2,"pid":3,"uid":0,"euid":0,"egid":0,"comm":"dd","exe":"/usr/bin/dd","device":"7:0","device_type":"block","label":"DATA1","hook":"file_open","operation":"write-open","mode":"enforce","op":2}"#,
            r#"{"seq":4,"time_ms":5,"pid":6,"uid":0,"euid":0,"egid":0,"comm":"sg_raw","exe":"/usr/bin/sg_raw","device":"21:1","device_type":"char","label":"DATA1","hook":"file_ioctl","operation":"SG_IO opcode 0x2a","mode":"audit","container":"rac1","op":8837,"command":{"opcode":42,"service_action":0}}"#,
            r#"{"seq":2,"time_ms":3,"pid":0,"uid":0,"euid":0,"egid":0,"comm":"loop0","exe":"","device":"7:0","device_type":"block","label":"DATA1","hook":"file_open","operation":"write-open","mode":"audit","noticed":{"kind":"exposed"},"op":0}"#,
        ] {
            let e: FilterEventInfo = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&e).unwrap(), line);
        }
    }

    #[test]
    fn answers_keep_their_field_names() {
        pinned::<LsdskResult>(
            r#"{"disks":[{"label":"DATA1","top":"/dev/mapper/mpatha",
            "stable_path":"/dev/asmguard/disks/DATA1","stable_link":"wrong",
            "stable_link_target":"/dev/null",
            "paths":[{"name":"dm-2","dev":"/dev/mapper/mpatha","devno":"253:2",
                      "kdev":265289730,"role":"multipath"}],
            "size_bytes":1073741824,"logical_block_size":512,"physical_block_size":4096,
            "header_status":"MEMBER","disk_group":"DATA","asm_disk_name":"DATA_0000",
            "filtering":"enforce (lsm)","filter_mode":"enforce","filter_backend":"lsm",
            "filter_scope":"full","conflict":false,"identified_by":"label",
            "serial":"S1","wwn":"0x5000",
            "presented":[{"container":"rac1","path":"/dev/asmguard/containers/rac1/DATA1",
                          "uid":154331,"gid":154329,"mode":"0660"}]}],
            "oracle_homes":[{"kind":"grid","path":"/u01/app/19c/grid",
                             "binaries":[{"path":"/u01/app/19c/grid/bin/oracle","uid":54331}]}],
            "oracle_retired":[{"path":"/u01/app/19c/db/bin/oracle","uid":54321}],
            "conflicts":[{"label":"TWIN","devices":["/dev/sde","/dev/sdf"]}],
            "devices_scanned":7,"unreadable":["sdz: I/O error"],
            "unmanaged":[{"device":"/dev/sdy","label":"data1","reason":"r"}],
            "not_presented":[{"container":"rac2","reason":"no process yet"},
                             {"container":"rac1","label":"DATA2","reason":"r"}]}"#,
        );
        pinned::<StatusResult>(
            r#"{"daemon_version":"0.1.0","protocol_version":1,"pid":1,"uptime_seconds":2,
            "kernel":"6.12.0","bpf_lsm":{"active":true,"lsm":["capability","bpf"]},"filter_backend":"lsm",
            "default_filter_mode":"enforce","disks":1,"conflicts":0,"devices_scanned":3,
            "socket":"/run/asmguard/asmguard.sock","config":"y",
            "metrics":{"address":"http://127.0.0.1:9465/metrics","state":"failing","error":"e",
                       "tracer":{"state":"attached","attach":"tp_btf","stamps":{"by":"kernel",
                       "stats_bit":20,"bit_from":{"from":"table","lines":"5.4-6.11"},"verified_on":"sdb"}}},
            "events":{"source":"kernel","udev_failed":"e"},"last_scan_ms":4,"filter_coverage":"open_time_only",
            "filter_reason":{"chosen":{"how":"best","backend":"fmod_ret","lsm":{"bpf":"inactive","list":"capability"},"refused":[{"backend":"lsm","error":"e"}]},"notes":[{"note":"kernel_opens_not_judged","error":"e"}],"changed":"ag_majors"},"filter_passthrough":"by_class_in_memory","filter_programs":[{"name":"ag_file_open","id":6,"hook":"file_open"}],
            "filter_other_programs":[{"name":"other","id":7,"hook":"file_open"},{"name":"old","id":8,"hook":null}],
            "filter_program_runs":[{"name":"ag_file_open","run_time_ns":1200,"run_cnt":3}],
            "filter_devices":2,"filter_majors":{"blk":[8,259],"chr":[21]},"allow_rules":[{"kind":"users","users":["grid"]},{"kind":"groups","groups":["asmadmin"]},
              {"kind":"executable","path":"/bin/x"},
              {"kind":"rule","name":"db","users":["grid"],"groups":[],"executables":[],"units":["db.service"],"cgroups":[]},
              {"kind":"oracle_homes","uid":54331,"executables":["/u01/bin/oracle"]},{"kind":"daemon"}],
            "allow_notes":[{"kind":"any_process_of_users"},{"kind":"executables_alone"},
              {"kind":"rule_users_alone","rule":"a"},{"kind":"rule_executables_alone","rule":"b"},
              {"kind":"ids_only"},{"kind":"unresolved","problem":"rule c: no user x"}],
            "oracle_homes":[{"kind":"database","path":"/u01","binaries":[]}],
            "oracle_retired":[{"path":"/u02/bin/oracle","uid":54321}],"filter_pins":"watched","map_fds":"periodic check only","protection":"unprotected","bpf_lsm_hint":{"lsm_param":"lsm=yama,bpf"},
            "claims":[{"label":"DATA1","major":253,"minor":2}],"claims_kept":"none (no NOTIFY_SOCKET: re-taken on start)",
            "claims_slow":{"disks":[{"label":"DATA1","major":253,"minor":2}],"ms":600,"all_taken":true},
            "container_nodes":1,
            "restart_needed":[{"key":"metrics.listen","in_force":"\"127.0.0.1:9465\"","in_file":"\"0.0.0.0:9465\""}],
            "reclaim_fence":{"disks":["DATA1"],"refuses":"all_writes"},
            "exposed":[{"label":"DATA1","pid":12,"comm":"dd","fd":3,"path":"/dev/sdb","device":"8:16"}],
            "writers_before":[{"label":"DATA1","pid":13,"comm":"sh","fd":5,"path":"/dev/sdb","device":"8:16"}],
            "loops_before":[{"label":"DATA1","name":"loop0","device":"7:0","backing":"/dev/sdb","read_only":false}],
            "not_presented":[{"container":"rac2","reason":"no process yet"}],
            "containers":[{"name":"rac1","cgroups":["lxc.payload.rac1"],
              "allow":{"users":[{"name":"grid","host_uid":154331}],
                       "groups":[{"name":"asmadmin","host_gid":154329}]},
              "problems":["container rac1: no user \"x\" in the container's /etc/passwd"]},
              {"name":"db","cgroups":[],"allow":"all","problems":[]}],
            "containers_enforced":true}"#,
        );
        pinned::<LabelResult>(
            r#"{"action":"labelled","label":"DATA1","device":"/dev/sdb",
            "erased":["dos"],"written":["32+32"]}"#,
        );
        pinned::<FilterResult>(r#"{"action":"audit","labels":["DATA1"],"backend":"lsm"}"#);
        pinned::<EventsResult>(
            r#"{"events":[{"seq":1,"time_ms":2,"pid":3,"uid":0,"euid":0,"egid":0,
            "comm":"dd","exe":"/usr/bin/dd","device":"7:0","device_type":"block",
            "label":"DATA1","hook":"file_open","operation":"write-open","op":2,"mode":"enforce"},
            {"seq":2,"time_ms":3,"pid":0,"uid":0,"euid":0,"egid":0,
            "comm":"loop0","exe":"","device":"7:0","device_type":"block",
            "label":"DATA1","hook":"file_open","operation":"write-open","op":0,"mode":"audit",
            "noticed":{"kind":"loop_before","device":{"label":"DATA1","name":"loop0",
            "device":"7:0","backing":"/dev/sdb","read_only":false}}},
            {"seq":3,"time_ms":4,"pid":5,"uid":0,"euid":0,"egid":0,
            "comm":"asmguardd","exe":"","device":"0:0","device_type":"block",
            "label":"","hook":"file_open","operation":"write-open","op":0,"mode":"enforce",
            "noticed":{"kind":"pin_replaced","pin":"ag_file_open",
            "found":{"what":"other_program_type","program":12}}},
            {"seq":4,"time_ms":5,"pid":6,"uid":0,"euid":0,"egid":0,
            "comm":"sg_raw","exe":"/usr/bin/sg_raw","device":"21:1","device_type":"char",
            "label":"DATA1","hook":"file_ioctl","operation":"SG_IO opcode 0x2a","op":8837,
            "command":{"opcode":42,"service_action":0},"mode":"audit","container":"rac1"}],
            "last_seq":4}"#,
        );
        pinned::<ReclaimResult>(
            r#"{"dry_run":true,"planned_bytes":1,"reclaimed_bytes":0,
            "disks":[{"label":"DATA1","device":"/dev/sdb","disk_group":"DATA",
            "method":"zeroout","ausize":1048576,"dsksize_aus":100,"free_aus":50,
            "at_blocks_read":1,"at_blocks_valid":1,"at_rejected":[],"planned_bytes":1,
            "ranges":1,"unaligned_bytes":0,"reclaimed_bytes":0,"resumed_from_bytes":0,
            "cancelled":false,"scan_seconds":0.5,"elapsed_seconds":0.5,
            "rate_bytes_per_sec":1.5,"discard_granularity":4096,
            "discard_max_bytes":4096,"above_size":false,
            "stopped":{"what":"heartbeat","message":"DATA1: heartbeat changed at 12:03:04 (mounted on another host?): stopped after 1.0 MiB","done_bytes":1048576,"seen_at":"12:03:04"}}]}"#,
        );
        pinned::<ProgressLine>(
            r#"{"version":1,"id":6,"progress":{"phase":"reclaiming","label":"DATA1",
            "done_bytes":1,"total_bytes":2,"percent":50.0,"rate_bytes_per_sec":1.5,
            "eta_seconds":0.5,"rate_limit_bytes_per_sec":2.0,
            "rate_note":"halved: disk p99 5.000 ms above 4 x 1.000 ms before the run"}}"#,
        );
    }

    /// The words of the typed values, as scripts compare them.
    #[test]
    fn typed_values_are_these_words() {
        let w = |v: Value| v.as_str().unwrap().to_string();
        let all = [
            w(serde_json::to_value(Protection::Protected).unwrap()),
            w(serde_json::to_value(Protection::Degraded).unwrap()),
            w(serde_json::to_value(Protection::Off).unwrap()),
            w(serde_json::to_value(Protection::Unprotected).unwrap()),
            w(serde_json::to_value(LinkState::Ok).unwrap()),
            w(serde_json::to_value(LinkState::Missing).unwrap()),
            w(serde_json::to_value(LinkState::Wrong).unwrap()),
            w(serde_json::to_value(Role::Labelled).unwrap()),
            w(serde_json::to_value(Role::Multipath).unwrap()),
            w(serde_json::to_value(Role::Path).unwrap()),
            w(serde_json::to_value(Role::Parent).unwrap()),
            w(serde_json::to_value(FilterAction::Enable).unwrap()),
            w(serde_json::to_value(FilterAction::Disable).unwrap()),
            w(serde_json::to_value(FilterAction::Audit).unwrap()),
            w(serde_json::to_value(ReclaimMethod::Discard).unwrap()),
            w(serde_json::to_value(ReclaimMethod::Zeroout).unwrap()),
            w(serde_json::to_value(LabelAction::Labelled).unwrap()),
            w(serde_json::to_value(LabelAction::Migrated).unwrap()),
            w(serde_json::to_value(LabelAction::Relabelled).unwrap()),
            w(serde_json::to_value(LabelAction::Unchanged).unwrap()),
            w(serde_json::to_value(LabelAction::Unlabelled).unwrap()),
            w(serde_json::to_value(LabelAction::Renamed).unwrap()),
        ];
        assert_eq!(
            all,
            [
                "protected",
                "degraded",
                "off",
                "unprotected",
                "ok",
                "missing",
                "wrong",
                "labelled",
                "multipath",
                "path",
                "parent",
                "enable",
                "disable",
                "audit",
                "discard",
                "zeroout",
                "labelled",
                "migrated",
                "relabelled",
                "unchanged",
                "unlabelled",
                "renamed"
            ]
        );
        // Display and FromStr say the same words
        assert_eq!(Protection::Unprotected.to_string(), "unprotected");
        assert_eq!("zeroout".parse(), Ok(ReclaimMethod::Zeroout));
        assert!("trim".parse::<ReclaimMethod>().is_err());
    }
}
