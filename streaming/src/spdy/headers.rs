//! SPDY/3 header blocks: the name/value block and its zlib compression with SPDY/3's preset
//! dictionary, one compression context per direction for the whole connection (spec §2.6.10.1).

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// SPDY/3's zlib dictionary (spec §2.6.10.1), 1423 bytes, Adler-32 `0xe3c6a7c2`.
pub const DICTIONARY: &[u8] = include_bytes!("dictionary.bin");
/// The Adler-32 of [`DICTIONARY`], the dictionary id in every SPDY/3 zlib stream header.
pub const DICTIONARY_ID: u32 = 0xe3c6_a7c2;

/// Default cap on one decompressed header block (kubelet's streams carry a handful of short
/// headers; the cap keeps a zlib bomb from allocating without bound).
pub const DEFAULT_MAX_HEADER_BLOCK: usize = 64 * 1024;
/// Cap on the number of name/value pairs in one block.
pub const MAX_HEADER_PAIRS: usize = 256;

/// The name/value pairs of a SYN_STREAM, SYN_REPLY or HEADERS frame, in wire order. Names are
/// lower-case; several values of one name are joined by NUL, as on the wire.
pub type Headers = Vec<(String, String)>;

/// The first value of `name` in `headers` (names compare case-insensitively).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.split('\0').next().unwrap_or(v))
}

/// What is wrong with a header block.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The zlib stream is corrupt.
    #[error("header block: zlib stream is invalid")]
    Inflate(#[source] flate2::DecompressError),
    /// The zlib stream wants a dictionary other than SPDY/3's.
    #[error("header block: zlib stream wants dictionary {0:#010x}, not SPDY/3's")]
    WrongDictionary(u32),
    /// Compression failed (should not happen with valid input).
    #[error("header block: zlib compression failed")]
    Deflate(#[source] flate2::CompressError),
    /// The decompressed block is larger than the cap.
    #[error("header block: decompressed size exceeds the limit of {max} bytes")]
    TooLarge {
        /// The cap.
        max: usize,
    },
    /// The block ends inside a length or a string.
    #[error("header block: truncated")]
    Truncated,
    /// More pairs than the cap.
    #[error("header block: {count} name/value pairs, more than the limit of {max}")]
    TooManyPairs {
        /// Pairs the block claims.
        count: u32,
        /// The cap.
        max: usize,
    },
    /// Bytes left after the last pair.
    #[error("header block: {0} bytes after the last name/value pair")]
    TrailingBytes(usize),
    /// A name that is empty, not lower-case or holds a NUL (spec §2.6.10).
    #[error("header block: invalid header name {0:?}: names must be non-empty lower-case without NUL")]
    InvalidName(String),
    /// A name or value that is not UTF-8.
    #[error("header block: header {0:?} is not UTF-8")]
    NotUtf8(String),
    /// The same name twice (spec §2.6.10: a protocol error).
    #[error("header block: duplicate header name {0:?}")]
    DuplicateName(String),
}

/// The sending direction's compression context.
pub struct HeaderDeflater {
    zlib: Compress,
}

impl std::fmt::Debug for HeaderDeflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderDeflater")
            .field("total_in", &self.zlib.total_in())
            .finish()
    }
}

impl Default for HeaderDeflater {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderDeflater {
    /// A fresh context primed with SPDY/3's dictionary.
    pub fn new() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(DICTIONARY)
            .expect("setting a dictionary on a fresh zlib stream");
        Self { zlib }
    }

    /// Serialize and compress `headers`, appending to `out`; the block ends with a sync flush so
    /// the peer can decompress it alone.
    pub fn compress(&mut self, headers: &Headers, out: &mut Vec<u8>) -> Result<(), HeaderError> {
        let mut raw = Vec::with_capacity(4 + headers.iter().map(|(n, v)| 8 + n.len() + v.len()).sum::<usize>());
        raw.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            raw.extend_from_slice(&(name.len() as u32).to_be_bytes());
            raw.extend_from_slice(name.as_bytes());
            raw.extend_from_slice(&(value.len() as u32).to_be_bytes());
            raw.extend_from_slice(value.as_bytes());
        }
        let start = self.zlib.total_in();
        loop {
            out.reserve(raw.len() / 2 + 64);
            let done = (self.zlib.total_in() - start) as usize;
            self.zlib
                .compress_vec(&raw[done..], out, FlushCompress::Sync)
                .map_err(HeaderError::Deflate)?;
            // The flush is complete once all input is in and zlib left room in the buffer.
            if (self.zlib.total_in() - start) as usize == raw.len() && out.len() < out.capacity() {
                return Ok(());
            }
        }
    }
}

/// The receiving direction's decompression context.
pub struct HeaderInflater {
    zlib: Decompress,
    max: usize,
    /// zlib asks for the dictionary once, at the stream's start; asking again is corrupt input.
    dictionary_set: bool,
}

impl std::fmt::Debug for HeaderInflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderInflater")
            .field("total_in", &self.zlib.total_in())
            .field("max", &self.max)
            .finish()
    }
}

impl Default for HeaderInflater {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_HEADER_BLOCK)
    }
}

impl HeaderInflater {
    /// A fresh context whose blocks may decompress to at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            zlib: Decompress::new(true),
            max,
            dictionary_set: false,
        }
    }

    /// Decompress one header block and parse its pairs. An error leaves the context unusable:
    /// the connection must end (the spec makes it a session error).
    pub fn decompress(&mut self, block: &[u8]) -> Result<Headers, HeaderError> {
        let start = self.zlib.total_in();
        let mut raw: Vec<u8> = Vec::with_capacity(block.len().saturating_mul(4).clamp(64, self.max));
        loop {
            if raw.len() == raw.capacity() {
                if raw.len() >= self.max {
                    return Err(HeaderError::TooLarge { max: self.max });
                }
                raw.reserve_exact(raw.len().clamp(64, self.max - raw.len()));
            }
            let (before_in, before_out) = (self.zlib.total_in(), self.zlib.total_out());
            let done = (before_in - start) as usize;
            match self
                .zlib
                .decompress_vec(&block[done..], &mut raw, FlushDecompress::Sync)
            {
                Ok(Status::Ok | Status::BufError | Status::StreamEnd) => {}
                Err(e) => match e.needs_dictionary() {
                    Some(DICTIONARY_ID) if !self.dictionary_set => {
                        self.zlib.set_dictionary(DICTIONARY).map_err(HeaderError::Inflate)?;
                        self.dictionary_set = true;
                        continue;
                    }
                    Some(other) => return Err(HeaderError::WrongDictionary(other)),
                    None => return Err(HeaderError::Inflate(e)),
                },
            }
            let consumed = (self.zlib.total_in() - start) as usize;
            let progressed = self.zlib.total_in() != before_in || self.zlib.total_out() != before_out;
            if raw.len() < raw.capacity() && (consumed == block.len() || !progressed) {
                if consumed < block.len() {
                    // zlib stopped before the input's end (the stream ended inside the block).
                    return Err(HeaderError::TrailingBytes(block.len() - consumed));
                }
                break;
            }
        }
        parse_block(&raw)
    }
}

fn parse_block(raw: &[u8]) -> Result<Headers, HeaderError> {
    let mut rest = raw;
    let count = take_u32(&mut rest)?;
    // Every pair takes at least 8 bytes: a count the block cannot hold is refused before any
    // allocation.
    if count as usize > MAX_HEADER_PAIRS {
        return Err(HeaderError::TooManyPairs {
            count,
            max: MAX_HEADER_PAIRS,
        });
    }
    if (count as usize) * 8 > rest.len() {
        return Err(HeaderError::Truncated);
    }
    let mut headers = Headers::with_capacity(count as usize);
    for _ in 0..count {
        let name = take_str(&mut rest)?;
        if name.is_empty() || name.bytes().any(|b| b == 0 || b.is_ascii_uppercase()) {
            return Err(HeaderError::InvalidName(name));
        }
        let value = take_str(&mut rest)?;
        if headers.iter().any(|(n, _)| *n == name) {
            return Err(HeaderError::DuplicateName(name));
        }
        headers.push((name, value));
    }
    if !rest.is_empty() {
        return Err(HeaderError::TrailingBytes(rest.len()));
    }
    Ok(headers)
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, HeaderError> {
    let (head, tail) = rest.split_first_chunk::<4>().ok_or(HeaderError::Truncated)?;
    *rest = tail;
    Ok(u32::from_be_bytes(*head))
}

fn take_str(rest: &mut &[u8]) -> Result<String, HeaderError> {
    let len = take_u32(rest)? as usize;
    if len > rest.len() {
        return Err(HeaderError::Truncated);
    }
    let (s, tail) = rest.split_at(len);
    *rest = tail;
    String::from_utf8(s.to_vec()).map_err(|e| HeaderError::NotUtf8(String::from_utf8_lossy(e.as_bytes()).into_owned()))
}
