//! Counting AWS API calls: an SDK interceptor that records every attempt
//! (retries included) by service and operation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Shared counts of API calls, keyed `service:Operation`.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallCounter {
    /// Calls per `service:Operation`.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// All calls.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }

    /// Calls whose operation does not start with a read verb
    /// (`Describe`, `Get`, `List`, `Head`).
    pub fn writes(&self) -> u64 {
        self.snapshot()
            .iter()
            .filter(|(k, _)| {
                let op = k.split_once(':').map(|(_, o)| o).unwrap_or(k);
                !["Describe", "Get", "List", "Head"]
                    .iter()
                    .any(|p| op.starts_with(p))
            })
            .map(|(_, v)| v)
            .sum()
    }

    fn record(&self, key: String) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry(key).or_default() += 1;
        }
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "kops-rs call counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let key = match cfg.load::<Metadata>() {
            Some(m) => format!("{}:{}", m.service(), m.name()),
            None => "unknown:unknown".to_string(),
        };
        self.record(key);
        Ok(())
    }
}
