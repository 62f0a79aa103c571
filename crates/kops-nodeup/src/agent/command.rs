//! Commands nodeup runs on the node (disk tools, apt), behind a trait so
//! tests record them instead of running them.

/// What a command run answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    /// The last lines of its standard error, for the failure message.
    pub stderr: String,
}

/// Runs a command line (`args[0]` found on `PATH`).
pub trait Runner {
    fn run(&self, args: &[&str]) -> Result<Ran, String>;
}

/// The machine's own commands.
#[derive(Debug, Clone, Copy)]
pub struct System;

impl Runner for System {
    fn run(&self, args: &[&str]) -> Result<Ran, String> {
        let output = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.trim().lines().collect();
        Ok(Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).trim().to_string(),
            stderr: lines[lines.len().saturating_sub(5)..].join("\n"),
        })
    }
}
