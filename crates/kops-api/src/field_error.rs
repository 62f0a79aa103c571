//! What validation reports: one [`FieldError`] per problem (the field, the
//! bad value, the fix) and a [`ValidationError`] gathering those of one
//! object. The base of the crate's checks: the cloud validators and the
//! flag checks of `create cluster` build these, [`crate::validation`]
//! gathers them.

use std::fmt;

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, e.g. `spec.subnets[1].cidr`.
    pub path: String,
    /// The offending value as the user wrote it.
    pub value: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            value: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn value(mut self, value: impl fmt::Display) -> Self {
        self.value = Some(value.to_string());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        if let Some(v) = &self.value {
            write!(f, "`{v}`: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// All the problems found in one object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    /// What was validated, e.g. ``cluster `a.example.com` ``.
    pub object: String,
    pub errors: Vec<FieldError>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{} is not valid ({n} problem{}):",
            self.object,
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n- {}", e.to_string().replace('\n', "\n  "))?;
        }
        Ok(())
    }
}

/// Turns a list of problems into a result.
pub fn into_result(object: String, errors: Vec<FieldError>) -> Result<(), ValidationError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationError { object, errors })
    }
}
