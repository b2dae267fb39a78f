//! Byte counts as a DBA reads them (`1.50 GiB`), for every subcommand that
//! prints sizes; it imports nothing of the CLI, so the subcommands share it
//! without importing one another.

/// `n` bytes in binary units: `512 B`, `1.50 GiB`.
pub fn human(n: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn binary_units() {
        assert_eq!(super::human(512), "512 B");
        assert_eq!(super::human(1536 << 20), "1.50 GiB");
    }
}
