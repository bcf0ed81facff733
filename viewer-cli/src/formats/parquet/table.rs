//! One Parquet file written row by row with bounded memory: rows go into Arrow column builders,
//! every [`BATCH_ROWS`] rows become a `RecordBatch` handed to the arrow-rs `ArrowWriter`, which
//! closes a row group whenever its encoded size reaches [`ROW_GROUP_BYTES`] (or a million rows).
//! So memory is one batch plus one row group, whatever the size of the trace.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

/// Rows collected before they are encoded (one Arrow batch).
pub const BATCH_ROWS: usize = 8192;
/// Encoded size at which a row group is closed and written out.
pub const ROW_GROUP_BYTES: usize = 64 << 20;
/// zstd level of the data pages: level 1 is several times faster than the default 3 and the
/// files are only a little larger (see docs-parquet.md for the figures).
const ZSTD_LEVEL: i32 = 1;

/// The type of a column; every column is nullable or not as its [`Column`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 text (Parquet BYTE_ARRAY, logical type STRING).
    Text,
    /// Signed 64-bit integer (Parquet INT64).
    Int,
    /// 64-bit float (Parquet DOUBLE).
    Float,
}

/// A column of a table: name, type, whether it may be null.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Whether the column may hold nulls.
    pub nullable: bool,
}

/// A non-null column.
pub const fn req(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: false }
}

/// A nullable column.
pub const fn opt(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: true }
}

enum Builder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        match kind {
            Kind::Text => Builder::Text(StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 16)),
            Kind::Int => Builder::Int(Int64Builder::with_capacity(BATCH_ROWS)),
            Kind::Float => Builder::Float(Float64Builder::with_capacity(BATCH_ROWS)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
        }
    }
}

/// A Parquet file being written.
pub struct Table {
    path: PathBuf,
    columns: Vec<Column>,
    schema: SchemaRef,
    builders: Vec<Builder>,
    writer: ArrowWriter<File>,
    pending: usize,
    rows: u64,
}

impl Table {
    /// Creates `path` with `columns`.
    pub fn create(path: &Path, columns: Vec<Column>) -> Result<Table> {
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| {
                let t = match c.kind {
                    Kind::Text => DataType::Utf8,
                    Kind::Int => DataType::Int64,
                    Kind::Float => DataType::Float64,
                };
                Field::new(c.name, t, c.nullable)
            })
            .collect();
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let level = ZstdLevel::try_new(ZSTD_LEVEL).context("zstd level")?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            .set_created_by(format!("jets {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .with_context(|| format!("starting {}", path.display()))?;
        Ok(Table {
            path: path.to_owned(),
            builders: columns.iter().map(|c| Builder::new(c.kind)).collect(),
            columns,
            schema,
            writer,
            pending: 0,
            rows: 0,
        })
    }

    /// Starts a row: give every column's value in order, then call [`Row::end`].
    pub fn row(&mut self) -> Row<'_> {
        Row { table: self, at: 0, wrong: None }
    }

    /// Adds `key` = `value` to the file's key-value metadata (in the footer).
    pub fn metadata(&mut self, key: &str, value: String) {
        self.writer.append_key_value_metadata(KeyValue::new(key.to_owned(), value));
    }

    fn write_batch(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .with_context(|| format!("building a batch of {}", self.path.display()))?;
        self.writer.write(&batch).with_context(|| format!("writing {}", self.path.display()))?;
        self.pending = 0;
        Ok(())
    }

    /// Writes the last rows and the footer; returns the number of rows.
    pub fn close(mut self) -> Result<u64> {
        self.write_batch()?;
        self.writer.close().with_context(|| format!("completing {}", self.path.display()))?;
        Ok(self.rows)
    }
}

/// One row being filled, column by column in schema order.
pub struct Row<'t> {
    table: &'t mut Table,
    at: usize,
    /// The first column given a value of the wrong type (a bug, reported by [`Row::end`]).
    wrong: Option<usize>,
}

impl Row<'_> {
    fn next(&mut self) -> Option<&mut Builder> {
        let i = self.at;
        self.at += 1;
        self.table.builders.get_mut(i)
    }

    fn mismatch(&mut self) {
        self.wrong.get_or_insert(self.at - 1);
    }

    /// Text, or null.
    pub fn text(mut self, v: Option<&str>) -> Self {
        match self.next() {
            Some(Builder::Text(b)) => b.append_option(v),
            _ => self.mismatch(),
        }
        self
    }

    /// Integer, or null.
    pub fn int(mut self, v: Option<i64>) -> Self {
        match self.next() {
            Some(Builder::Int(b)) => b.append_option(v),
            _ => self.mismatch(),
        }
        self
    }

    /// Float, or null.
    pub fn float(mut self, v: Option<f64>) -> Self {
        match self.next() {
            Some(Builder::Float(b)) => b.append_option(v),
            _ => self.mismatch(),
        }
        self
    }

    /// Completes the row; writes a batch when enough rows are pending.
    pub fn end(self) -> Result<()> {
        let table = self.table;
        if let Some(i) = self.wrong.or((self.at != table.columns.len()).then_some(self.at)) {
            // The builders are now of unequal length: the file cannot be completed.
            bail!(
                "internal error: row {} of {} does not match column {} of the schema",
                table.rows,
                table.path.display(),
                table.columns.get(i).map_or("(past the end)", |c| c.name)
            );
        }
        table.rows += 1;
        table.pending += 1;
        if table.pending >= BATCH_ROWS {
            table.write_batch()?;
        }
        Ok(())
    }
}
