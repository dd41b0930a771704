//! Batch files as iproute2 reads them: one command per line, single and double quotes, `#`
//! comments, `\` at the end of a line continues it.

/// One command of a batch file, with the line it started on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchLine {
    /// First line of the command.
    pub line: usize,
    /// Its words.
    pub words: Vec<String>,
}

/// Split a batch file into commands. Blank and comment-only lines are skipped. An unterminated
/// quote is an error naming its line.
pub fn parse(text: &str) -> Result<Vec<BatchLine>, (usize, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if pending.is_empty() {
            start = i + 1;
        }
        if let Some(body) = raw.strip_suffix('\\') {
            pending.push_str(body);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let words = split_words(&pending).map_err(|e| (start, e))?;
        if !words.is_empty() {
            out.push(BatchLine { line: start, words });
        }
        pending.clear();
    }
    if !pending.is_empty() {
        let words = split_words(&pending).map_err(|e| (start, e))?;
        if !words.is_empty() {
            out.push(BatchLine { line: start, words });
        }
    }
    Ok(out)
}

/// Split one line into words: whitespace separates, quotes group, `#` at the start of a word
/// begins a comment.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' if !in_word => break,
            '"' | '\'' => {
                in_word = true;
                let mut closed = false;
                for q in chars.by_ref() {
                    if q == c {
                        closed = true;
                        break;
                    }
                    cur.push(q);
                }
                if !closed {
                    return Err(format!("unterminated {c} quote"));
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_quotes_comments() {
        assert_eq!(split_words("add  a b # c").expect("ok"), ["add", "a", "b"]);
        assert_eq!(
            split_words("dev \"my dev\" x").expect("ok"),
            ["dev", "my dev", "x"]
        );
        assert_eq!(split_words("a'b c'd").expect("ok"), ["ab cd"]);
        assert_eq!(
            split_words("# all comment").expect("ok"),
            Vec::<String>::new()
        );
        assert_eq!(split_words("a#b").expect("ok"), ["a#b"]);
        assert!(split_words("a \"b").is_err());
    }

    #[test]
    fn continuation_and_line_numbers() {
        let t = "# head\n\nadd 10.0.0.0/8 \\\n  nexthop via 1.2.3.4\ndel 10.0.0.0/8\n";
        let v = parse(t).expect("ok");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].line, 3);
        assert_eq!(
            v[0].words,
            ["add", "10.0.0.0/8", "nexthop", "via", "1.2.3.4"]
        );
        assert_eq!(v[1].line, 5);
        assert_eq!(parse("a\nb 'c\n").expect_err("bad quote").0, 2);
    }
}
