//! The `sless` binary: `sless server`, `sless up DIR` and the client commands. `main` only
//! parses, wires and reports the error chain.

mod apply;
mod cli;
mod connect;
mod functions_cli;
mod manifest;
mod observe_cli;
mod output;
mod pack;
mod serve;
mod telemetry;
mod triggers_cli;

use clap::Parser;

/// mimalloc instead of glibc's malloc: the call path allocates and frees many small
/// buffers per call across threads, where glibc's arenas spent a fifth of the server's time
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    if !matches!(cli.command, cli::Command::Server(_) | cli::Command::Up(_)) {
        // `sless fn list | head` ends quietly instead of panicking on a closed pipe. Servers
        // keep Rust's default (SIGPIPE ignored): a closed connection must not kill them.
        sigpipe::reset();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: cli::Cli) -> anyhow::Result<std::process::ExitCode> {
    use cli::Command;
    match cli.command {
        Command::Server(args) => {
            telemetry::init(args.log_format);
            serve::server(args).await?;
        }
        Command::Up(args) => {
            telemetry::init(args.server.log_format);
            serve::up(args).await?;
        }
        Command::Deploy(args) => functions_cli::deploy(&cli.conn, args).await?,
        Command::Invoke(args) => return functions_cli::invoke(&cli.conn, args).await,
        Command::Fn(cmd) => functions_cli::functions(&cli.conn, cmd).await?,
        Command::Versions(args) => functions_cli::versions(&cli.conn, args).await?,
        Command::Trigger(cmd) => triggers_cli::triggers(&cli.conn, cmd).await?,
        Command::Job(cmd) => return triggers_cli::jobs(&cli.conn, cmd).await,
        Command::Invocations(args) => observe_cli::invocations(&cli.conn, args).await?,
        Command::Invocation(cmd) => observe_cli::invocation(&cli.conn, cmd).await?,
        Command::Logs(args) => observe_cli::logs(&cli.conn, args).await?,
        Command::Gc(args) => functions_cli::gc(&cli.conn, args).await?,
    }
    Ok(std::process::ExitCode::SUCCESS)
}
