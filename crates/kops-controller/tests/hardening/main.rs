//! kops-controller against hostile callers and hostile nodes, each case
//! through the running controller over TLS on loopback: moto is AWS (STS
//! replays the tokens, EC2 holds the instances), kops-testkit's test API
//! server is Kubernetes.

mod binding;
mod fairness;
mod flood;
mod harness;
mod refusals;
