//! Running the real binary: `crdctl(&[...])` returns its exit code, stdout and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a run of `crdctl` produced.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `crdctl` with `args` in `dir`.
#[track_caller]
pub fn crdctl_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crdctl starts");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let output = child.wait_with_output().expect("crdctl runs");
    Output {
        code: output.status.code().expect("crdctl exited normally, not by a signal"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `crdctl` with `args` from the repository root.
#[track_caller]
pub fn crdctl(args: &[&str]) -> Output {
    crdctl_in(&repo_root(), args, None)
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The shared corpus of real CRDs, beside the repository.
pub fn corpus() -> PathBuf {
    let corpus = repo_root().join("../shared/corpus");
    assert!(corpus.is_dir(), "the corpus must be at {}", corpus.display());
    corpus
}

/// Every YAML file in the corpus, sorted.
pub fn corpus_files() -> Vec<PathBuf> {
    let files = files_under(&corpus(), "yaml");
    assert!(files.len() >= 77, "corpus has {} files", files.len());
    files
}

/// Every file under `dir` (recursively) whose extension is `extension`, sorted.
pub fn files_under(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A corpus file's path relative to the corpus, for messages.
pub fn short(path: &Path) -> String {
    path.strip_prefix(corpus()).unwrap_or(path).display().to_string()
}

/// Headless Chromium — Debian's `chromium`, or the binary `$CRDCTL_CHROMIUM` names — with a
/// profile of its own, as a person's browser would open a page.
pub struct Chromium {
    binary: PathBuf,
    profile: tempfile::TempDir,
}

impl Chromium {
    /// Finds the browser; a test that needs it fails without it, saying how to get it.
    pub fn new() -> Chromium {
        let binary = std::env::var_os("CRDCTL_CHROMIUM").map(PathBuf::from).or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path).map(|dir| dir.join("chromium")).find(|candidate| candidate.is_file())
        });
        let binary = binary.unwrap_or_else(|| {
            panic!("chromium is missing: apt-get install chromium (Debian's package), or set CRDCTL_CHROMIUM")
        });
        Chromium { binary, profile: tempfile::tempdir().unwrap() }
    }

    /// Runs the browser with `args`: standard output, and the page's console messages.
    #[track_caller]
    fn run(&self, args: &[&str]) -> (String, Vec<String>) {
        // As root (CI) the browser's sandbox cannot start; the pages opened are the tests' own.
        let output = Command::new(&self.binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("chromium runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "chromium {args:?}: {stderr}");
        let console = stderr.lines().filter(|line| line.contains(":CONSOLE")).map(str::to_string).collect();
        (String::from_utf8(output.stdout).expect("the DOM is UTF-8"), console)
    }

    /// The page's DOM once it has loaded and its scripts have run, and what it wrote to the
    /// console (errors included).
    #[track_caller]
    pub fn open(&self, url: &str) -> Opened {
        let (dom, console) = self.run(&["--dump-dom", url]);
        Opened { dom, console }
    }

    /// A PNG of the page in a window `width` × `height` pixels, written to `path`.
    #[track_caller]
    pub fn screenshot(&self, url: &str, path: &Path, width: u32, height: u32) {
        self.run(&[&format!("--screenshot={}", path.display()), &format!("--window-size={width},{height}"), url]);
    }
}

/// A page as the browser left it.
pub struct Opened {
    pub dom: String,
    pub console: Vec<String>,
}
