//! A process's memory as Linux reports it in `/proc/<pid>/status`, in KiB.

/// One field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`); `pid` is a number or `self`.
fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix(field)).unwrap();
    line.trim_start_matches(':').split_whitespace().next().unwrap().parse().unwrap()
}

/// The resident memory of process `pid` (or `self`).
pub fn resident_kib(pid: &str) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The resident high-water mark of process `pid` (or `self`), reset by writing 5 to
/// `/proc/<pid>/clear_refs`.
pub fn peak_kib(pid: &str) -> u64 {
    status_kib(pid, "VmHWM")
}
