//! Where CPython's `json.loads` rejects a text, and with which message and position: what a
//! `JSONDecodeError` says for a damaged trainer_state.json (the executor's resume raises it as
//! HF does). Python's JSON *values* are [`crate::formats::pyjson`]'s; this is only its errors.

/// Where CPython 3.11's `json.loads` fails on `text` (message, character index), or None when
/// it parses. Follows `json.decoder` / `_json.c`: each error at the index Python reports
/// (an unterminated string at its opening quote, a missing delimiter where it should be).
pub fn py_json_error(text: &str) -> Option<(String, usize)> {
    let c: Vec<char> = text.chars().collect();
    let p = JsonScan { c: &c };
    let start = p.ws(0);
    match p.value(start, 0) {
        Err(e) => Some(e),
        Ok(end) => {
            let end = p.ws(end);
            (end != c.len()).then(|| ("Extra data".to_string(), end))
        }
    }
}

struct JsonScan<'a> {
    c: &'a [char],
}

type Scan = Result<usize, (String, usize)>;

impl JsonScan<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.c.get(i).copied()
    }
    fn ws(&self, mut i: usize) -> usize {
        while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
            i += 1;
        }
        i
    }
    fn lit(&self, i: usize, word: &str) -> bool {
        word.chars().enumerate().all(|(k, w)| self.at(i + k) == Some(w))
    }
    fn err(msg: &str, pos: usize) -> (String, usize) {
        (msg.to_string(), pos)
    }
    fn value(&self, i: usize, depth: usize) -> Scan {
        if depth > 900 {
            return Err(Self::err("nesting too deep (not modelled)", i));
        }
        match self.at(i) {
            Some('"') => self.string(i + 1),
            Some('{') => self.object(i + 1, depth),
            Some('[') => self.array(i + 1, depth),
            Some('n') if self.lit(i, "null") => Ok(i + 4),
            Some('t') if self.lit(i, "true") => Ok(i + 4),
            Some('f') if self.lit(i, "false") => Ok(i + 5),
            Some('N') if self.lit(i, "NaN") => Ok(i + 3),
            Some('I') if self.lit(i, "Infinity") => Ok(i + 8),
            Some('-') if self.lit(i, "-Infinity") => Ok(i + 9),
            Some(ch) if ch == '-' || ch.is_ascii_digit() => self.number(i),
            _ => Err(Self::err("Expecting value", i)),
        }
    }
    /// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`; a fraction or exponent without digits is not
    /// part of the number.
    fn number(&self, i: usize) -> Scan {
        let digit = |k: usize| self.at(k).is_some_and(|ch| ch.is_ascii_digit());
        let mut k = i;
        if self.at(k) == Some('-') {
            k += 1;
        }
        match self.at(k) {
            Some('0') => k += 1,
            Some('1'..='9') => {
                while digit(k) {
                    k += 1;
                }
            }
            _ => return Err(Self::err("Expecting value", i)),
        }
        if self.at(k) == Some('.') && digit(k + 1) {
            k += 1;
            while digit(k) {
                k += 1;
            }
        }
        if matches!(self.at(k), Some('e' | 'E')) {
            let mut e = k + 1;
            if matches!(self.at(e), Some('+' | '-')) {
                e += 1;
            }
            if digit(e) {
                while digit(e) {
                    e += 1;
                }
                k = e;
            }
        }
        Ok(k)
    }
    /// `i`: just past the opening quote.
    fn string(&self, i: usize) -> Scan {
        let begin = i - 1;
        let mut k = i;
        loop {
            match self.at(k) {
                None => return Err(Self::err("Unterminated string starting at", begin)),
                Some('"') => return Ok(k + 1),
                Some('\\') => match self.at(k + 1) {
                    None => return Err(Self::err("Unterminated string starting at", begin)),
                    Some('u') => {
                        let hex = (2..6).all(|d| self.at(k + d).is_some_and(|ch| ch.is_ascii_hexdigit()));
                        if !hex {
                            return Err(Self::err("Invalid \\uXXXX escape", k + 1));
                        }
                        k += 6;
                    }
                    Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => k += 2,
                    Some(other) => return Err((format!("Invalid \\escape: {}", crate::formats::pyjson::py_str_repr(&other.to_string())), k)),
                },
                Some(ch) if (ch as u32) < 0x20 => return Err(Self::err("Invalid control character at", k)),
                Some(_) => k += 1,
            }
        }
    }
    /// `i`: just past `{`.
    fn object(&self, i: usize, depth: usize) -> Scan {
        let mut k = self.ws(i);
        match self.at(k) {
            Some('}') => return Ok(k + 1),
            Some('"') => {}
            _ => return Err(Self::err("Expecting property name enclosed in double quotes", k)),
        }
        loop {
            k = self.string(k + 1)?;
            k = self.ws(k);
            if self.at(k) != Some(':') {
                return Err(Self::err("Expecting ':' delimiter", k));
            }
            k = self.ws(k + 1);
            k = self.value(k, depth + 1)?;
            k = self.ws(k);
            match self.at(k) {
                Some('}') => return Ok(k + 1),
                Some(',') => {}
                _ => return Err(Self::err("Expecting ',' delimiter", k)),
            }
            k = self.ws(k + 1);
            if self.at(k) != Some('"') {
                return Err(Self::err("Expecting property name enclosed in double quotes", k));
            }
        }
    }
    /// `i`: just past `[`.
    fn array(&self, i: usize, depth: usize) -> Scan {
        let mut k = self.ws(i);
        if self.at(k) == Some(']') {
            return Ok(k + 1);
        }
        loop {
            k = self.value(k, depth + 1)?;
            k = self.ws(k);
            match self.at(k) {
                Some(']') => return Ok(k + 1),
                Some(',') => k = self.ws(k + 1),
                _ => return Err(Self::err("Expecting ',' delimiter", k)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::py_json_error;

    #[test]
    fn python_json_error_positions() {
        // Each checked with CPython 3.11's json.loads.
        let e = |t: &str| py_json_error(t).map(|(m, p)| format!("{m} {p}"));
        assert_eq!(e(""), Some("Expecting value 0".into()));
        assert_eq!(e("{\n  \"a\": \"xy"), Some("Unterminated string starting at 9".into()));
        assert_eq!(e("{\"a\": 1"), Some("Expecting ',' delimiter 7".into()));
        assert_eq!(e("{\"a\": 1,"), Some("Expecting property name enclosed in double quotes 8".into()));
        assert_eq!(e("{\"a\" 1}"), Some("Expecting ':' delimiter 5".into()));
        assert_eq!(e("[1, 2."), Some("Expecting ',' delimiter 5".into()));
        assert_eq!(e("{\"a\": [1, "), Some("Expecting value 10".into()));
        assert_eq!(e("{\"a\": tru"), Some("Expecting value 6".into()));
        assert_eq!(e("{} x"), Some("Extra data 3".into()));
        assert_eq!(e("{\"a\": [1.5e3, -0, NaN, \"\\u00e9\"]}"), None);
    }
}