//! Reading input: paths, folders and standard input, and one file's text, which the fast
//! readers read when they can and the located reader reads from where they stepped aside.

use std::cell::Cell;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use super::document::{Document, ReadError, document_limit};
use super::fast::{TooManyItems, parse_json_fast_within, parse_yaml_fast};
use super::located::parse_located_each;

/// Reads every path in order: `-` is standard input, a folder is read recursively in
/// sorted order (`*.yaml`, `*.yml`, `*.json`), a file is read whatever its name.
pub fn read_paths(paths: &[PathBuf], stdin: &mut dyn Read) -> Result<Vec<Document>, ReadError> {
    let mut documents = Vec::new();
    read_paths_each(paths, stdin, &mut |document| documents.push(document))?;
    Ok(documents)
}

/// [`read_paths`], handing each document to `each` as soon as it and every document before
/// it are read: the caller works on the first documents of a large file while later ones
/// are still being read on other threads. After an error nothing more is handed over.
pub fn read_paths_each(
    paths: &[PathBuf],
    stdin: &mut dyn Read,
    each: &mut dyn FnMut(Document),
) -> Result<(), ReadError> {
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .map_err(|source| ReadError::Io {
                    path: "-".into(),
                    source,
                })?;
            parse_stream_each("-", &text, each)?;
            continue;
        }
        for file in files_under(path)? {
            let shown = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|source| ReadError::Io {
                path: shown.clone(),
                source,
            })?;
            parse_stream_each(&shown, &text, each)?;
        }
    }
    Ok(())
}

/// The manifest files under a path, sorted; the path itself when it is a file.
pub fn files_under(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(files_under(&entry)?);
        } else if matches!(
            entry.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(entry);
        }
    }
    Ok(files)
}

/// Parses one file's text: every document becomes a [`Document`]; empty documents are skipped;
/// `kind: List` is expanded into its items.
pub fn parse_stream(file: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    let mut documents = Vec::new();
    parse_stream_each(file, text, &mut |document| documents.push(document))?;
    Ok(documents)
}

/// [`parse_stream`], handing each document to `each` as soon as it and every document before
/// it are read. The fast readers go first; when one meets a document it cannot read cleanly
/// after handing some over, the located reader reads the text again and hands over only
/// the documents after those (the readers agree on every document both read). A stream of
/// more documents than [`document_limit`] allows is refused at the first one too many.
pub fn parse_stream_each(
    file: &str,
    text: &str,
    each: &mut dyn FnMut(Document),
) -> Result<(), ReadError> {
    let limit = document_limit(text.len());
    let handed = Cell::new(0usize);
    let too_many = Cell::new(false);
    let mut give = |document| {
        if handed.get() == limit {
            too_many.set(true);
            return ControlFlow::Break(());
        }
        handed.set(handed.get() + 1);
        each(document);
        ControlFlow::Continue(())
    };
    // The fast readers hand over clean objects only, each longer than the limit's share.
    let mut complete = match parse_json_fast_within(file, text, limit, &mut |d| {
        let _ = give(d);
    }) {
        Ok(complete) => complete,
        Err(TooManyItems) => {
            too_many.set(true);
            true
        }
    };
    if !complete && handed.get() == 0 {
        complete = parse_yaml_fast(file, text, &mut |d| {
            let _ = give(d);
        });
    }
    if !complete && !too_many.get() {
        parse_located_each(file, text, handed.get(), &mut give)?;
    }
    if too_many.get() {
        return Err(ReadError::TooManyDocuments {
            path: file.to_string(),
            limit,
            bytes: text.len(),
        });
    }
    Ok(())
}
