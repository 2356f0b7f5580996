//! Field paths built only when a message needs one: validation walks every node of every
//! object, and almost all of them are valid.

use std::fmt::Write;

/// Where a value sits in the object: a chain of steps back to the root.
#[derive(Clone, Copy)]
pub(crate) enum Loc<'a> {
    /// The object itself.
    Root,
    /// A property: `parent.name`.
    Field(&'a Loc<'a>, &'a str),
    /// A map entry as `field.Path.Key` writes it: `parent[name]`.
    Key(&'a Loc<'a>, &'a str),
    /// A list item: `parent[index]`.
    Index(&'a Loc<'a>, usize),
}

impl<'a> Loc<'a> {
    pub(crate) fn field(&'a self, name: &'a str) -> Loc<'a> {
        Loc::Field(self, name)
    }

    pub(crate) fn key(&'a self, name: &'a str) -> Loc<'a> {
        Loc::Key(self, name)
    }

    pub(crate) fn index(&'a self, index: usize) -> Loc<'a> {
        Loc::Index(self, index)
    }

    /// The API server's field path: `spec.items[0].name`; empty at the root.
    pub(crate) fn path(&self) -> String {
        let mut out = String::new();
        self.write_path(&mut out);
        out
    }

    fn write_path(&self, out: &mut String) {
        match self {
            Loc::Root => {}
            Loc::Field(parent, name) => {
                parent.write_path(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Loc::Key(parent, name) => {
                parent.write_path(out);
                let _ = write!(out, "[{name}]");
            }
            Loc::Index(parent, index) => {
                parent.write_path(out);
                let _ = write!(out, "[{index}]");
            }
        }
    }

    /// The path as a field error names it: at the root upstream's path is nil, printed `<nil>`.
    pub(crate) fn error_field(&self) -> String {
        match self {
            Loc::Root => "<nil>".to_string(),
            _ => self.path(),
        }
    }

    /// The JSON pointer of the value in the object.
    pub(crate) fn pointer(&self) -> String {
        let mut out = String::new();
        self.write_pointer(&mut out);
        out
    }

    fn write_pointer(&self, out: &mut String) {
        match self {
            Loc::Root => {}
            Loc::Field(parent, name) | Loc::Key(parent, name) => {
                parent.write_pointer(out);
                out.push('/');
                out.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
            Loc::Index(parent, index) => {
                parent.write_pointer(out);
                let _ = write!(out, "/{index}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Loc;

    #[test]
    fn paths_are_written_as_the_api_server_writes_them() {
        let root = Loc::Root;
        let spec = root.field("spec");
        let labels = spec.field("labels");
        let key = labels.key("a/b");
        let items = spec.field("items");
        let item = items.index(2);
        let name = item.field("name");
        assert_eq!(root.path(), "");
        assert_eq!(name.path(), "spec.items[2].name");
        assert_eq!(key.path(), "spec.labels[a/b]");
        assert_eq!(key.pointer(), "/spec/labels/a~1b");
        assert_eq!(name.pointer(), "/spec/items/2/name");
    }
}
