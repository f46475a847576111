//! `tl serve`: the HTTP server (see the `tl-server` crate and docs/api.md).

use std::path::PathBuf;

use anyhow::Result;
use tl_server::ServerConfig;

use crate::catalogue;
use crate::cli::ServeArgs;

/// Other names of served files: (name, path).
type Aliases = Vec<(String, PathBuf)>;

/// The files to serve, and the catalogue names they were given by (which
/// requests may use too; `smollm2` for the default model).
fn models_and_aliases(given: &[PathBuf]) -> Result<(Vec<PathBuf>, Aliases)> {
    if given.is_empty() {
        let default = catalogue::default_entry();
        let path = catalogue::ensure(default)?;
        return Ok((vec![path.clone()], vec![(default.name.to_string(), path)]));
    }
    let models = given
        .iter()
        .map(|m| catalogue::resolve(Some(m)))
        .collect::<Result<Vec<_>>>()?;
    let aliases = given
        .iter()
        .zip(&models)
        .filter(|(name, path)| name != path)
        .map(|(name, path)| (name.to_string_lossy().into_owned(), path.clone()))
        .collect();
    Ok((models, aliases))
}

pub fn run(args: &ServeArgs) -> Result<()> {
    let (models, aliases) = models_and_aliases(&args.model)?;
    let config = ServerConfig {
        models,
        aliases,
        host: args.host.clone(),
        port: args.port,
        parallel: args.parallel,
        max_queue: args.max_queue,
        context: args.ctx,
        prefill_chunk_tokens: args.prefill_chunk,
        model_memory_budget: args.model_memory_mb.map(|mb| mb * 1_000_000),
        prompt_cache: args.prompt_cache,
        api_keys: args.api_key.clone(),
        request_timeout_seconds: args.request_timeout,
        max_connections: args.max_connections,
        device: args.device,
        gpu_options: args.gpu.to_options(),
    };
    if config.api_keys.is_empty() && !is_loopback(&config.host) {
        eprintln!(
            "warning: listening on {} without --api-key: anyone who can reach this machine can use the models",
            config.host
        );
    }
    eprintln!("loading {} ...", config.models[0].display());
    tl_server::serve(&config, &mut |address| {
        // Tests and scripts wait for this line to learn the port.
        eprintln!("listening on http://{address}");
    })?;
    Ok(())
}

/// Whether `host` only accepts connections from this machine.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_hosts_are_recognised() {
        assert!(is_loopback("127.0.0.1"));
        assert!(is_loopback("::1"));
        assert!(is_loopback("localhost"));
        assert!(!is_loopback("0.0.0.0"));
        assert!(!is_loopback("192.168.1.5"));
    }
}
