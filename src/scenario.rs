//! Scenario format v1 (conformance/README.md).
