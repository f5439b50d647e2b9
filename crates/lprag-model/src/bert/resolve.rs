//! Finding a model directory on disk (and, with the `hf-hub` feature, downloading one).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use lprag_core::{Error, Result};

/// The model [`super::SentenceEncoder::load`] uses when none is named.
pub const DEFAULT_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// Environment variable naming a model directory; it overrides the Hugging Face cache.
pub const MODEL_DIR_ENV: &str = "LPRAG_MODEL_DIR";

/// Files a directory must hold to count as a usable model snapshot.
pub(crate) const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Find the directory of model `model_id` (for example
/// `"sentence-transformers/all-MiniLM-L6-v2"`), trying in order:
///
/// 1. `explicit`, when given (it must be an existing directory);
/// 2. the directory named by the environment variable `LPRAG_MODEL_DIR` (same rule);
/// 3. the Hugging Face hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
///    `~/.cache/huggingface/hub`, then `models--{org}--{name}/snapshots/*`; the snapshot
///    named by `refs/main` is preferred, else the most recently modified one holding
///    `config.json`, `tokenizer.json` and `model.safetensors`;
/// 4. with the cargo feature `hf-hub`, a download from the Hugging Face Hub into that
///    cache (this blocks on the network).
///
/// `scripts/fetch-model.sh` fills the cache for the default model without a Hugging Face
/// connection. The returned directory is not checked further: [`super::SentenceEncoder::from_dir`]
/// reports missing or malformed files by name.
///
/// # Errors
/// [`Error::Io`] naming the path when `explicit` or `LPRAG_MODEL_DIR` is not a directory;
/// [`Error::NotReady`] listing the places searched when no copy is found; with `hf-hub`,
/// [`Error::Backend`] when the download fails.
pub fn resolve_model_dir(explicit: Option<&Path>, model_id: &str) -> Result<PathBuf> {
    resolve_with(explicit, model_id, &|k| std::env::var_os(k))
}

/// The Hugging Face hub cache directory: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
/// `~/.cache/huggingface/hub`; `None` when none of these can be determined.
pub fn hf_hub_cache_dir() -> Option<PathBuf> {
    hub_cache_with(&|k| std::env::var_os(k))
}

type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn non_empty(env: Env<'_>, key: &str) -> Option<PathBuf> {
    env(key).filter(|v| !v.is_empty()).map(PathBuf::from)
}

pub(crate) fn hub_cache_with(env: Env<'_>) -> Option<PathBuf> {
    if let Some(p) = non_empty(env, "HF_HUB_CACHE") {
        return Some(p);
    }
    if let Some(p) = non_empty(env, "HF_HOME") {
        return Some(p.join("hub"));
    }
    let home = non_empty(env, "HOME").or_else(|| non_empty(env, "USERPROFILE"))?;
    Some(home.join(".cache").join("huggingface").join("hub"))
}

fn require_dir(path: &Path) -> Result<PathBuf> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(path.to_path_buf()),
        Ok(_) => Err(Error::io(
            path,
            io::Error::new(
                io::ErrorKind::NotADirectory,
                "model path is not a directory",
            ),
        )),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// `true` when `dir` holds every file of [`REQUIRED_FILES`] (symlinks followed).
pub(crate) fn is_complete(dir: &Path) -> bool {
    REQUIRED_FILES.iter().all(|f| dir.join(f).is_file())
}

/// `models--org--name` for `org/name`.
pub(crate) fn cache_repo_folder(model_id: &str) -> String {
    format!("models--{}", model_id.replace('/', "--"))
}

/// The best complete snapshot of `model_id` in the hub cache `hub`.
pub(crate) fn find_in_cache(hub: &Path, model_id: &str) -> Option<PathBuf> {
    let repo = hub.join(cache_repo_folder(model_id));
    let snapshots = repo.join("snapshots");
    if let Ok(main) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let main = main.trim();
        if !main.is_empty() && !main.contains(['/', '\\']) {
            let dir = snapshots.join(main);
            if is_complete(&dir) {
                return Some(dir);
            }
        }
    }
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                && is_complete(p)
        })
        .map(|p| {
            let t = std::fs::metadata(&p)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (t, p)
        })
        .collect();
    // Newest first; ties broken by name so the choice is deterministic.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().next().map(|(_, p)| p)
}

pub(crate) fn resolve_with(
    explicit: Option<&Path>,
    model_id: &str,
    env: Env<'_>,
) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return require_dir(dir);
    }
    if let Some(dir) = non_empty(env, MODEL_DIR_ENV) {
        return require_dir(&dir);
    }
    let mut searched = vec![format!("${MODEL_DIR_ENV} (unset)")];
    let hub = hub_cache_with(env);
    match &hub {
        Some(hub) => {
            if let Some(dir) = find_in_cache(hub, model_id) {
                return Ok(dir);
            }
            searched.push(
                hub.join(cache_repo_folder(model_id))
                    .join("snapshots")
                    .display()
                    .to_string(),
            );
        }
        None => searched.push("the Hugging Face cache (no HF_HUB_CACHE, HF_HOME or HOME)".into()),
    }
    #[cfg(feature = "hf-hub")]
    if let Some(hub) = &hub {
        return download(hub, model_id, non_empty(env, HF_ENDPOINT_ENV));
    }
    Err(Error::NotReady(format!(
        "no local copy of model {model_id:?}; searched {}. To get it: turn on the `hf-hub` \
         cargo feature (of lprag, lprag-model or lprag-cli), which downloads it into the \
         Hugging Face cache on first use; or download it yourself \
         (`huggingface-cli download {model_id}`, or scripts/fetch-model.sh in an lprag \
         checkout, for all-MiniLM-L6-v2); or set {MODEL_DIR_ENV} to a directory holding {}",
        searched.join(", "),
        REQUIRED_FILES.join(", ")
    )))
}

/// Environment variable naming the hub to download from instead of
/// `https://huggingface.co` (a mirror, or a local server standing in for the hub);
/// the same variable the Hugging Face libraries read.
pub const HF_ENDPOINT_ENV: &str = "HF_ENDPOINT";

/// Download the files the encoder reads into the hub cache `hub`, from `endpoint` (else
/// the public hub); returns the snapshot.
#[cfg(feature = "hf-hub")]
fn download(hub: &Path, model_id: &str, endpoint: Option<PathBuf>) -> Result<PathBuf> {
    use hf_hub::api::sync::ApiBuilder;
    use hf_hub::Cache;

    let component = format!("hf-hub download of {model_id}");
    let mut builder = ApiBuilder::from_cache(Cache::new(hub.to_path_buf())).with_progress(false);
    let from = match endpoint {
        Some(url) => {
            let url = url.to_string_lossy().trim_end_matches('/').to_string();
            builder = builder.with_endpoint(url.clone());
            url
        }
        None => "https://huggingface.co".to_string(),
    };
    tracing::info!(
        target: "lprag",
        model = model_id,
        from = %from,
        cache = %hub.display(),
        "downloading the model (once; later runs read the cache)"
    );
    let api = builder
        .build()
        .map_err(|e| Error::backend(component.clone(), e))?;
    let repo = api.model(model_id.to_string());
    let mut snapshot = None;
    for f in REQUIRED_FILES {
        let p = repo
            .get(f)
            .map_err(|e| Error::backend(format!("{component} ({f})"), e))?;
        snapshot = p.parent().map(Path::to_path_buf);
    }
    let snapshot = snapshot.ok_or_else(|| Error::NotReady(format!("{component}: no snapshot")))?;
    // Optional files: absent from plain transformers repositories.
    let _ = repo.get("sentence_bert_config.json");
    if let Ok(modules) = repo.get("modules.json") {
        if let Ok(Some(p)) = super::config::Pipeline::from_file(&modules) {
            if let Some(dir) = p.pooling_dir.filter(|d| !d.is_empty()) {
                repo.get(&format!("{dir}/config.json"))
                    .map_err(|e| Error::backend(format!("{component} ({dir}/config.json)"), e))?;
            }
        }
    }
    Ok(snapshot)
}
