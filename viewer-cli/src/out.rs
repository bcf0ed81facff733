//! Printing to standard output from subcommands: a closed pipe (`jets stats | head`) becomes an
//! error that ends the command, never a panic.

/// `writeln!` to the locked stdout; a closed pipe is an error, not a panic.
macro_rules! say {
    ($o:expr, $($t:tt)*) => {
        writeln!($o, $($t)*).context("writing to standard output")?
    };
}

/// `write!` to the locked stdout.
macro_rules! put {
    ($o:expr, $($t:tt)*) => {
        write!($o, $($t)*).context("writing to standard output")?
    };
}
