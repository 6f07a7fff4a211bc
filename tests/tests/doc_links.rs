//! Every relative link in `README.md` and `docs/*.md` resolves: the linked
//! file or directory exists (relative to the linking file; a leading `/` is
//! the repository root), and a `#fragment` into a markdown file is the slug
//! of one of that file's headings, by GitHub's rules. `http(s)` and `mailto`
//! links, and anything inside fenced code blocks or code spans, are skipped.
//! The scanner is deliberately small: inline `[text](target)` links and
//! images, ATX headings (`#` … `######`).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// One inline link of a markdown text.
#[derive(Debug)]
struct Link {
    /// 1-based line of its `[`.
    line: usize,
    text: String,
    target: String,
}

/// What a link's path names.
enum Entry {
    Dir,
    File,
    Markdown(String),
}

/// The text with every line of a fenced code block (fences included) made
/// empty, so that line numbers stay and nothing in code looks like a link or
/// a heading.
fn without_fenced_code(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut open: Option<(u8, usize)> = None;
    for line in markdown.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = line.trim_start_matches(' ').trim_end();
        let fence = rest.bytes().next().filter(|c| *c == b'`' || *c == b'~');
        let run = fence.map_or(0, |c| rest.bytes().take_while(|b| *b == c).count());
        let is_fence = indent <= 3 && run >= 3;
        match open {
            None if is_fence => open = fence.map(|c| (c, run)),
            Some((c, n)) if is_fence && fence == Some(c) && run >= n && rest.len() == run => {
                open = None
            }
            None => {
                out.push_str(line);
                continue;
            }
            Some(_) => {}
        }
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// True when the text from `i` starts a line that is blank (a paragraph
/// break), given that `i` follows a newline.
fn blank_line_at(s: &[u8], i: usize) -> bool {
    s[i..]
        .iter()
        .take_while(|b| **b != b'\n')
        .all(|b| b.is_ascii_whitespace())
}

/// The index just past the code span opening at `i` (a run of backticks), or
/// past the run itself when no run of the same length closes it within the
/// paragraph (then the backticks are literal).
fn skip_code_span(s: &[u8], i: usize) -> usize {
    let n = s[i..].iter().take_while(|b| **b == b'`').count();
    let mut j = i + n;
    while j < s.len() {
        if s[j] == b'\n' && blank_line_at(s, j + 1) {
            break;
        }
        if s[j] == b'`' {
            let m = s[j..].iter().take_while(|b| **b == b'`').count();
            if m == n {
                return j + m;
            }
            j += m;
        } else {
            j += 1;
        }
    }
    i + n
}

/// The link opening at `s[i] == b'['`: its text's end (the `]`), its target
/// and the index past its `)`; `None` when no inline link starts there.
fn parse_link(s: &[u8], i: usize) -> Option<(usize, String, usize)> {
    let mut depth = 0usize;
    let mut j = i;
    let close = loop {
        match *s.get(j)? {
            b'\\' => j += 2,
            b'`' => j = skip_code_span(s, j),
            b'[' => {
                depth += 1;
                j += 1;
            }
            b']' => {
                depth -= 1;
                if depth == 0 {
                    break j;
                }
                j += 1;
            }
            b'\n' if blank_line_at(s, j + 1) => return None,
            _ => j += 1,
        }
    };
    if s.get(close + 1) != Some(&b'(') {
        return None;
    }
    let mut k = close + 2;
    while s.get(k).is_some_and(|b| *b == b' ') {
        k += 1;
    }
    let (start, end) = if s.get(k) == Some(&b'<') {
        let e = k + s[k..].iter().position(|b| *b == b'>' || *b == b'\n')?;
        if s[e] != b'>' {
            return None;
        }
        let start = k + 1;
        k = e + 1;
        (start, e)
    } else {
        let start = k;
        let mut parens = 0usize;
        while let Some(&b) = s.get(k) {
            match b {
                b'\\' => k += 1,
                b'(' => parens += 1,
                b')' if parens == 0 => break,
                b')' => parens -= 1,
                _ if b.is_ascii_whitespace() => break,
                _ => {}
            }
            k += 1;
        }
        (start, k)
    };
    let target = String::from_utf8_lossy(&s[start..end]);
    // An optional quoted title, then the closing parenthesis.
    let after = k + s[k..].iter().position(|b| *b == b')')?;
    let between = String::from_utf8_lossy(&s[k..after]);
    let title = between.trim();
    let titled = title.is_empty()
        || (title.len() >= 2
            && matches!(
                (title.as_bytes()[0], title.as_bytes()[title.len() - 1]),
                (b'"', b'"') | (b'\'', b'\'')
            ));
    titled.then(|| (close, target.into_owned(), after + 1))
}

/// Every inline link (and image) outside fenced code and code spans.
fn links(markdown: &str) -> Vec<Link> {
    let prose = without_fenced_code(markdown);
    let s = prose.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'`' => i = skip_code_span(s, i),
            b'[' => match parse_link(s, i) {
                Some((close, target, end)) => {
                    out.push(Link {
                        line: prose[..i].matches('\n').count() + 1,
                        text: prose[i + 1..close].to_owned(),
                        target,
                    });
                    i = end;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, inline markup and every
/// character but letters, digits, `-`, `_` and spaces dropped, spaces made
/// `-`. Links count by their text.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let s = heading.as_bytes();
    let mut i = 0;
    let mut from = 0;
    while i < s.len() {
        if s[i] == b'['
            && let Some((close, _, end)) = parse_link(s, i)
        {
            text.push_str(&heading[from..i]);
            text.push_str(&heading[i + 1..close]);
            i = end;
            from = end;
            continue;
        }
        i += 1;
    }
    text.push_str(&heading[from..]);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            _ if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's ATX headings, in order; a repeated slug
/// gets `-1`, `-2`, … as on GitHub.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in without_fenced_code(markdown).lines() {
        let rest = line.trim_start_matches(' ');
        if line.len() - rest.len() > 3 {
            continue;
        }
        let level = rest.bytes().take_while(|b| *b == b'#').count();
        let text = &rest[level..];
        if !(1..=6).contains(&level) || !(text.is_empty() || text.starts_with([' ', '\t'])) {
            continue;
        }
        let mut text = text.trim();
        let closing = text.trim_end_matches('#');
        if closing.is_empty() || closing.ends_with([' ', '\t']) {
            text = closing.trim_end();
        }
        let base = slug(text);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// `%XX` escapes decoded (a bad escape is kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(v) if b[i] == b'%' => {
                out.push(v);
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved lexically; `None` when it climbs out of
/// the repository.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// The broken links of `file` (repository-relative), one line each: where,
/// the link, and why. `lookup` says what a repository-relative path is.
fn broken_links(
    file: &Path,
    markdown: &str,
    lookup: &dyn Fn(&Path) -> Option<Entry>,
) -> Vec<String> {
    let mut broken = Vec::new();
    for link in links(markdown) {
        let target = link.target.trim();
        let lower = target.to_ascii_lowercase();
        if ["http://", "https://", "mailto:"]
            .iter()
            .any(|p| lower.starts_with(p))
        {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((p, f)) => (p, Some(percent_decode(f))),
            None => (target, None),
        };
        let path = percent_decode(path);
        let why = if target.is_empty() {
            Some("empty link target".to_owned())
        } else {
            let joined = if path.is_empty() {
                Some(file.to_path_buf())
            } else if let Some(from_root) = path.strip_prefix('/') {
                normalise(Path::new(from_root))
            } else {
                normalise(&file.parent().unwrap_or(Path::new("")).join(&path))
            };
            match joined {
                None => Some(format!("`{path}` leads out of the repository")),
                Some(resolved) => match (lookup(&resolved), fragment) {
                    (None, _) => Some(format!("no file or directory `{}`", resolved.display())),
                    (Some(Entry::Markdown(text)), Some(f)) if !anchors(&text).contains(&f) => {
                        Some(format!(
                            "no heading in `{}` has the anchor `#{f}`",
                            resolved.display()
                        ))
                    }
                    _ => None,
                },
            }
        };
        if let Some(why) = why {
            let text = link.text.split_whitespace().collect::<Vec<_>>().join(" ");
            broken.push(format!(
                "{}:{}: [{text}]({}): {why}",
                file.display(),
                link.line,
                link.target
            ));
        }
    }
    broken
}

/// What a repository-relative path is on disk under `root`.
fn on_disk(root: &Path, rel: &Path) -> Option<Entry> {
    let path = root.join(rel);
    let meta = std::fs::metadata(&path).ok()?;
    if meta.is_dir() {
        Some(Entry::Dir)
    } else if path.extension().is_some_and(|e| e == "md") {
        std::fs::read_to_string(&path).ok().map(Entry::Markdown)
    } else {
        Some(Entry::File)
    }
}

#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ directory at the repository root")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("a file name")))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "no markdown files in docs/");
    files.extend(docs);

    let lookup = |rel: &Path| on_disk(&root, rel);
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        checked += links(&text).len();
        broken.extend(broken_links(file, &text, &lookup));
    }
    assert!(checked > 0, "no links found in {files:?}");
    assert!(
        broken.is_empty(),
        "{} of {checked} links in README.md and docs/*.md do not resolve:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_scanner_reports_deliberately_broken_links() {
    let guide = "# Guide\n\n## `POST /v1/score`\n\n\
        See [the score call](#post-v1score), [the\ncost](other.md#routing-cost), [titled](other.md \"Other\"), [angled](<a file.md>),\n\
        [home](../README.md), [docs](.), [a missing file](missing.md),\n\
        [a missing heading](other.md#no-such-heading), [web](https://example.com/x.md),\n\
        `[in code](nowhere.md)` and ![an image](img.png).\n\n\
        ```sh\n[fenced](nowhere.md)\n# not a heading\n```\n\n## Routing cost\n";
    let other = "# Other\n\n## Routing cost\n";
    let lookup = |rel: &Path| match rel.to_str()? {
        "README.md" => Some(Entry::Markdown("# Home\n".to_owned())),
        "docs" => Some(Entry::Dir),
        "docs/guide.md" => Some(Entry::Markdown(guide.to_owned())),
        "docs/other.md" => Some(Entry::Markdown(other.to_owned())),
        _ => None,
    };

    let found: Vec<String> = links(guide).into_iter().map(|l| l.target).collect();
    assert_eq!(
        found,
        [
            "#post-v1score",
            "other.md#routing-cost",
            "other.md",
            "a file.md",
            "../README.md",
            ".",
            "missing.md",
            "other.md#no-such-heading",
            "https://example.com/x.md",
            "img.png",
        ]
    );
    assert_eq!(links(guide)[1].line, 5, "a link's line is that of its `[`");

    let broken = broken_links(Path::new("docs/guide.md"), guide, &lookup);
    assert_eq!(
        broken,
        [
            "docs/guide.md:6: [angled](a file.md): no file or directory `docs/a file.md`",
            "docs/guide.md:7: [a missing file](missing.md): no file or directory `docs/missing.md`",
            "docs/guide.md:8: [a missing heading](other.md#no-such-heading): \
             no heading in `docs/other.md` has the anchor `#no-such-heading`",
            "docs/guide.md:9: [an image](img.png): no file or directory `docs/img.png`",
        ]
    );
    assert_eq!(anchors(guide), ["guide", "post-v1score", "routing-cost"]);
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("`POST /v1/score`"), "post-v1score");
    assert_eq!(slug("Routing cost"), "routing-cost");
    assert_eq!(slug("HTTP API (v1)"), "http-api-v1");
    assert_eq!(
        slug("`prequal` (hot-cold lexicographic)"),
        "prequal-hot-cold-lexicographic"
    );
    assert_eq!(
        slug("Load shedding at 2× capacity"),
        "load-shedding-at-2-capacity"
    );
    assert_eq!(slug("See [the API](api.md) first"), "see-the-api-first");
    assert_eq!(slug("snake_case and CamelCase"), "snake_case-and-camelcase");
    assert_eq!(
        anchors("# A\n## A\n### A ##\n####### not one\n#nor this\n"),
        ["a", "a-1", "a-2"]
    );
}
