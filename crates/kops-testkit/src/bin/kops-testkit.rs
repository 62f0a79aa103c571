//! `kops-testkit gce-api [--page-size N] [--fault-rate F]`: starts the GCE
//! API test server, prints its base URL and the gcloud endpoint overrides
//! (as `export` lines), and serves until killed.
//!
//! `kops-testkit aws-limits --upstream URL [--read N/R] [--write N/R]
//! [--route53 N/R] [--log FILE]`: AWS' request-rate limits in front of moto
//! (`kops_testkit::aws_limits`); prints `listening PORT`, serves until
//! killed, printing its request and throttle counts on stderr every 10 s.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("aws-limits") {
        return aws_limits(&args[1..]);
    }
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

fn aws_limits(args: &[String]) -> ExitCode {
    let mut upstream = None;
    let mut log = None;
    let mut buckets = kops_testkit::aws_limits::Buckets::default();
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().map(String::as_str).unwrap_or("");
        let bucket = || {
            let (size, rate) = value.split_once('/')?;
            Some((size.parse::<f64>().ok()?, rate.parse::<f64>().ok()?))
        };
        match (flag.as_str(), bucket()) {
            ("--upstream", _) => upstream = Some(value.to_string()),
            ("--log", _) => log = Some(std::path::PathBuf::from(value)),
            ("--read", Some(b)) => buckets.read = b,
            ("--write", Some(b)) => buckets.write = b,
            ("--route53", Some(b)) => buckets.route53 = b,
            _ => {
                eprintln!("kops-testkit aws-limits: {flag} needs a value (--upstream: http://HOST:PORT, buckets: SIZE/REFILL)");
                return ExitCode::from(2);
            }
        }
    }
    let Some(upstream) = upstream else {
        eprintln!("usage: kops-testkit aws-limits --upstream http://HOST:PORT [--read N/R] [--write N/R] [--route53 N/R] [--log FILE]");
        return ExitCode::from(2);
    };
    let proxy =
        match kops_testkit::aws_limits::AwsLimits::start_logged(&upstream, buckets, log.as_deref())
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("kops-testkit aws-limits: {e}");
                return ExitCode::FAILURE;
            }
        };
    let port = proxy.url().rsplit(':').next().unwrap_or("").to_string();
    println!("listening {port}");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(10));
        let (requests, throttled) = proxy.totals();
        eprintln!("aws-limits: {requests} requests, {throttled} throttled");
    }
}
