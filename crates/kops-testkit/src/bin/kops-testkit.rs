//! `kops-testkit gce-api [--page-size N] [--fault-rate F]`: starts the GCE
//! API test server, prints its base URL and the gcloud endpoint overrides
//! (as `export` lines), and serves until killed.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("gce-api") {
        eprintln!("usage: kops-testkit gce-api [--page-size N] [--fault-rate F]");
        return ExitCode::from(2);
    }
    let api = match kops_testkit::GceApi::start() {
        Ok(api) => api,
        Err(e) => {
            eprintln!(
                "kops-testkit: cannot start the GCE API server: {e} (run scripts/setup-venv)"
            );
            return ExitCode::FAILURE;
        }
    };
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().map(String::as_str).unwrap_or("");
        match flag.as_str() {
            "--page-size" => match value.parse() {
                Ok(n) => api.set_page_size(Some(n)),
                Err(_) => return bad(flag),
            },
            "--fault-rate" => match value.parse::<f64>() {
                Ok(f) if (0.0..=1.0).contains(&f) => api.set_fault_rate(f),
                _ => return bad(flag),
            },
            _ => return bad(flag),
        }
    }
    println!("{}", api.url());
    for (name, value) in api.env() {
        println!("export {name}={value}");
    }
    api.serve_forever()
}

fn bad(flag: &str) -> ExitCode {
    eprintln!(
        "kops-testkit: {flag} needs a value (--page-size: a count, --fault-rate: 0.0 to 1.0)"
    );
    ExitCode::from(2)
}
