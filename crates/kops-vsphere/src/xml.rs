//! Just enough XML for vSphere's SOAP answers: a tree of elements (local
//! names, attributes, text) read with `xmlparser`, and escaping for the
//! requests this crate writes.

/// One element: its local name (the namespace prefix dropped), attributes
/// (by `prefix:local` name when prefixed), child elements and its text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The element at a path of child names.
    pub fn at(&self, path: &[&str]) -> Option<&Element> {
        path.iter().try_fold(self, |e, name| e.child(name))
    }

    /// The text of the child at `path`.
    pub fn text_at(&self, path: &[&str]) -> Option<&str> {
        self.at(path).map(|e| e.text.as_str())
    }

    /// The schema type an element declares (`xsi:type`).
    pub fn xsi_type(&self) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n.ends_with(":type"))
            .map(|(_, v)| v.as_str())
    }

    /// An attribute by name (`type`; `xsi:type` for a prefixed one).
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first element named `name` anywhere below (depth first).
    pub fn find(&self, name: &str) -> Option<&Element> {
        self.children.iter().find_map(|c| {
            if c.name == name {
                Some(c)
            } else {
                c.find(name)
            }
        })
    }
}

/// Parses a document into its root element.
pub fn parse(text: &str) -> Result<Element, String> {
    use xmlparser::{ElementEnd, Token, Tokenizer};
    let mut stack: Vec<Element> = vec![Element::default()];
    for token in Tokenizer::from(text) {
        let token = token.map_err(|e| format!("malformed XML: {e}"))?;
        match token {
            Token::ElementStart { local, .. } => stack.push(Element {
                name: local.as_str().to_string(),
                ..Default::default()
            }),
            Token::Attribute {
                prefix,
                local,
                value,
                ..
            } => {
                if let Some(top) = stack.last_mut() {
                    let name = if prefix.is_empty() {
                        local.as_str().to_string()
                    } else {
                        format!("{}:{}", prefix.as_str(), local.as_str())
                    };
                    top.attrs.push((name, unescape(value.as_str())));
                }
            }
            Token::ElementEnd { end, .. } => match end {
                ElementEnd::Open => {}
                ElementEnd::Close(..) | ElementEnd::Empty => {
                    let done = stack.pop().ok_or("malformed XML: unbalanced end tag")?;
                    stack
                        .last_mut()
                        .ok_or("malformed XML: unbalanced end tag")?
                        .children
                        .push(done);
                }
            },
            Token::Text { text } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&unescape(text.as_str()));
                }
            }
            Token::Cdata { text, .. } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(text.as_str());
                }
            }
            _ => {}
        }
    }
    let mut document = stack
        .pop()
        .filter(|_| stack.is_empty())
        .ok_or("malformed XML: unclosed element")?;
    document
        .children
        .pop()
        .ok_or_else(|| "empty XML document".to_string())
}

/// Text with XML's five entities escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_soap_answer() {
        let doc = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x"><soapenv:Body><R xmlns="urn:vim25"><returnval type="Folder">group-v3</returnval><v xsi:type="xsd:string">a &amp; b&#10;</v><m xsi:type="ManagedObjectReference" type="ResourcePool">resgroup-1</m><e/></R></soapenv:Body></soapenv:Envelope>"#;
        let root = parse(doc).unwrap();
        assert_eq!(root.name, "Envelope");
        let r = root.at(&["Body", "R"]).unwrap();
        assert_eq!(r.text_at(&["returnval"]), Some("group-v3"));
        assert_eq!(r.child("returnval").unwrap().attr("type"), Some("Folder"));
        assert_eq!(r.text_at(&["v"]), Some("a & b\n"));
        assert!(r.child("e").is_some());
        let m = r.child("m").unwrap();
        assert_eq!(
            (m.attr("type"), m.xsi_type()),
            (Some("ResourcePool"), Some("ManagedObjectReference"))
        );
        assert_eq!(escape("<a&'\">"), "&lt;a&amp;&apos;&quot;&gt;");
    }
}
