//! The case process's side of its output: sending its standard output and
//! error to `output.N` in the scenario's folder (in the format of
//! [`crate::output`]) and marking the operations.

/// The case process's side: sending its output to the file and marking
/// the operations. Everything here is best effort: output that cannot be
/// kept is never a reason to change what the case does.
#[cfg(unix)]
mod imp {
    use std::fs::File;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, OnceLock};
    use std::time::Duration;

    use crate::output::{file, CUT, KEEP_BYTES};

    /// The output file, for the lab's markers.
    static FILE: OnceLock<File> = OnceLock::new();
    /// The process's standard error as it was given, for the lab's messages.
    static LAB_ERR: OnceLock<Mutex<File>> = OnceLock::new();
    /// True once the output was cut.
    static CUT_DONE: AtomicBool = AtomicBool::new(false);
    /// The last marker written, so a repeated one is not written again.
    static LAST: Mutex<Option<String>> = Mutex::new(None);

    /// Sends this process's standard output and error to `output.N` in
    /// `dir`, and watches its size.
    pub fn start(dir: &Path, process: u32) {
        let Ok(out) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file(dir, process))
        else {
            return;
        };
        // SAFETY: plain descriptor calls on descriptors this process owns.
        unsafe {
            let saved = libc::dup(2);
            if saved < 0 {
                return;
            }
            let _ = LAB_ERR.set(Mutex::new(File::from_raw_fd(saved)));
            let _ = std::io::stdout().flush();
            libc::dup2(out.as_raw_fd(), 1);
            libc::dup2(out.as_raw_fd(), 2);
        }
        let _ = FILE.set(out);
        let _ = std::thread::Builder::new()
            .name("output-cap".into())
            .spawn(watch);
    }

    /// How often the output's size is looked at. A print loop gets this
    /// long past [`KEEP_BYTES`] before it is cut, a megabyte or so; a case
    /// that prints little pays a wake-up this often, not one a millisecond.
    const LOOK_EVERY: Duration = Duration::from_millis(20);

    /// Cuts the output once the file holds [`KEEP_BYTES`]: from then on the
    /// process prints to the null device.
    fn watch() {
        let Some(out) = FILE.get() else { return };
        loop {
            std::thread::sleep(LOOK_EVERY);
            let size = out.metadata().map(|m| m.len()).unwrap_or(0);
            if size < KEEP_BYTES {
                continue;
            }
            let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
                return;
            };
            CUT_DONE.store(true, Ordering::SeqCst);
            // SAFETY: replaces descriptors 1 and 2 with the null device.
            unsafe {
                libc::dup2(null.as_raw_fd(), 1);
                libc::dup2(null.as_raw_fd(), 2);
            }
            let _ = (&*out).write_all(CUT.as_bytes());
            return;
        }
    }

    /// Marks that operation `op` (about `subject`) begins: what is printed
    /// next is its output.
    pub fn begin(op: Option<&str>, subject: Option<&str>) {
        write_marker(&format!(
            "\0{}\t{}\0",
            op.unwrap_or(""),
            subject.unwrap_or("")
        ));
    }

    /// How much the process has printed so far, in bytes.
    pub fn printed() -> u64 {
        let Some(out) = FILE.get() else { return 0 };
        let _ = std::io::stdout().flush();
        out.metadata().map(|m| m.len()).unwrap_or(0)
    }

    /// Marks that what was printed since `before` (see [`printed`]) came
    /// from operation `op`, if anything was: a scheduled tick is marked
    /// only when it printed, so hours of quiet ticks write nothing.
    pub fn end(op: Option<&str>, subject: Option<&str>, before: u64) {
        if printed() > before {
            // Never skipped as a repeat: each tick that printed claims its
            // own lines.
            *crate::db::lock(&LAST) = None;
            write_marker(&format!(
                "\0/{}\t{}\0",
                op.unwrap_or(""),
                subject.unwrap_or("")
            ));
        }
    }

    fn write_marker(marker: &str) {
        let Some(mut out) = FILE.get() else { return };
        if CUT_DONE.load(Ordering::SeqCst) {
            return;
        }
        let mut last = crate::db::lock(&LAST);
        if last.as_deref() == Some(marker) {
            return;
        }
        let _ = std::io::stdout().flush();
        let _ = out.write_all(marker.as_bytes());
        *last = Some(marker.to_string());
    }

    /// Writes one of the lab's own messages to the process's standard
    /// error as it was given (where the parent reads why a process stopped).
    pub fn lab_message(text: &str) {
        match LAB_ERR.get() {
            Some(err) => {
                let _ = writeln!(crate::db::lock(err), "{text}");
            }
            None => eprintln!("{text}"),
        }
    }
}

/// Without Unix descriptors the output is not captured.
#[cfg(not(unix))]
mod imp {
    use std::path::Path;

    pub fn start(_dir: &Path, _process: u32) {}
    pub fn begin(_op: Option<&str>, _subject: Option<&str>) {}
    pub fn printed() -> u64 {
        0
    }
    pub fn end(_op: Option<&str>, _subject: Option<&str>, _before: u64) {}
    pub fn lab_message(text: &str) {
        eprintln!("{text}");
    }
}

pub use imp::*;
