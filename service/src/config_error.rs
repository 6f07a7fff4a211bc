//! Plain messages for configuration that cannot be loaded: the dotted key
//! (`model.typo_key`) and where it came from, not figment's profile-prefixed
//! path inside nested backticks.

use figment::error::Kind;

/// One line per problem in `e`: `unknown key `model.typo_key` in <source>;
/// expected one of: dir, enabled, …`, or `key `log.max_rows` in <source>:
/// <what is wrong>`. `<source>` is the file or the environment variables.
pub fn describe(e: figment::Error) -> String {
    e.into_iter()
        .map(|err| {
            let mut path: Vec<String> = err.path.iter().map(|p| p.to_lowercase()).collect();
            let source = err.metadata.as_ref().map_or_else(
                || "the defaults".to_string(),
                |m| match &m.source {
                    Some(src) => format!("{} {src}", m.name),
                    None => m.name.to_string(),
                },
            );
            match &err.kind {
                Kind::UnknownField(field, expected) => {
                    if path.last() != Some(&field.to_lowercase()) {
                        path.push(field.to_lowercase());
                    }
                    format!(
                        "unknown key `{}` in {source}; expected one of: {}",
                        path.join("."),
                        expected.join(", ")
                    )
                }
                kind if path.is_empty() => format!("{kind} in {source}"),
                kind => format!("key `{}` in {source}: {kind}", path.join(".")),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
