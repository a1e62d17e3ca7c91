//! The `sless` binary: `sless server`, `sless up DIR` and the client commands. `main` only
//! parses, wires and reports the error chain.

mod apply;
mod build_context;
mod cli;
mod connect;
mod functions_cli;
mod manifest;
mod observe_cli;
mod operator;
mod output;
mod pack;
mod serve;
mod telemetry;
mod tenants_cli;
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
        Command::Deploy(c) => functions_cli::deploy(&c.conn, c.args).await?,
        Command::Invoke(c) => return functions_cli::invoke(&c.conn, c.args).await,
        Command::Fn(c) => functions_cli::functions(&c.conn, c.command).await?,
        Command::Versions(c) => functions_cli::versions(&c.conn, c.args).await?,
        Command::Rollback(c) => functions_cli::rollback(&c.conn, c.args).await?,
        Command::Env(c) => functions_cli::env(&c.conn, c.command).await?,
        Command::Trigger(c) => return triggers_cli::triggers(&c.conn, c.command).await,
        Command::Job(c) => return triggers_cli::jobs(&c.conn, c.command).await,
        Command::Invocations(c) => observe_cli::invocations(&c.conn, c.args).await?,
        Command::Invocation(c) => {
            let conn = c.conn.clone();
            let (id, out) = c.wanted()?;
            observe_cli::invocation(&conn, &id, out).await?
        }
        Command::Logs(c) => observe_cli::logs(&c.conn, c.args).await?,
        Command::Gc(c) => functions_cli::gc(&c.conn, c.args).await?,
        Command::Token(c) => tenants_cli::tokens(&c.conn, c.command).await?,
        Command::Namespace(c) => tenants_cli::namespaces(&c.conn, c.command).await?,
        Command::Crds => print!("{}", sless_kube::crds_yaml()?),
        Command::BuildContext(args) => build_context::run(args).await?,
        Command::Operator(args) => {
            telemetry::init(args.log_format);
            operator::run(args).await?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
