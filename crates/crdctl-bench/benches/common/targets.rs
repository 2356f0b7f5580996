//! The targets a benchmark holds its figures to (`docs/performance.md` sets them): each one
//! missed is named at the end, and the benchmark exits 1.

/// What a benchmark found against its targets.
#[derive(Default)]
pub struct Targets {
    missed: Vec<String>,
}

impl Targets {
    /// Records `target` as missed unless `met`; `met` is returned for the caller's own report.
    pub fn expect(&mut self, met: bool, target: impl Into<String>) -> bool {
        if !met {
            self.missed.push(target.into());
        }
        met
    }

    /// Prints every missed target and exits 1 if there was one.
    pub fn finish(self) {
        if self.missed.is_empty() {
            println!("every target met");
            return;
        }
        println!("targets missed:");
        for target in &self.missed {
            println!("  - {target}");
        }
        std::process::exit(1);
    }
}
