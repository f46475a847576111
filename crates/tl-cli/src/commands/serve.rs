//! `tl serve`: the HTTP server (see the `tl-server` crate and docs/api.md).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use tl_server::{ModelSource, PullProgress, Pulled, ServeEvent, ServerConfig};

use crate::catalogue::{self, Progress};
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
        models_dir: catalogue::cache_dir().ok(),
        model_source: Some(Arc::new(Catalogue)),
        cors_origins: args.cors.clone(),
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
    let first = config.models[0].display().to_string();
    tl_server::serve(&config, &mut |event| match event {
        ServeEvent::Bound(_) => eprintln!("loading {first} ..."),
        // Tests and scripts wait for this line to learn the port.
        ServeEvent::Listening(address) => eprintln!("listening on http://{address}"),
    })?;
    Ok(())
}

/// `/api/pull`'s source: the catalogue, into the cache folder, as `tl model
/// pull` does.
struct Catalogue;

impl ModelSource for Catalogue {
    fn check(&self, name: &str) -> std::result::Result<(), String> {
        catalogue::find(name)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    }

    fn pull(
        &self,
        name: &str,
        progress: &mut dyn FnMut(PullProgress),
    ) -> std::result::Result<Pulled, String> {
        let entry = catalogue::find(name).map_err(|e| format!("{e:#}"))?;
        progress(PullProgress::status(format!("pulling {}", entry.file_name)));
        let path =
            catalogue::pull(entry, &mut Reporter { progress }).map_err(|e| format!("{e:#}"))?;
        Ok(Pulled {
            path,
            sha256: entry.sha256.to_owned(),
        })
    }
}

/// Hands the catalogue's progress to the server's stream.
struct Reporter<'a> {
    progress: &'a mut dyn FnMut(PullProgress),
}

impl Progress for Reporter<'_> {
    fn step(&mut self, status: &str) {
        (self.progress)(PullProgress::status(status));
    }

    fn bytes(&mut self, status: &str, done: u64, total: u64) {
        (self.progress)(PullProgress {
            status: status.to_owned(),
            completed: Some(done),
            total: Some(total),
        });
    }

    fn finish(&mut self) {}
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
