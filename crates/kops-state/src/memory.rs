//! An in-process store (`memory://name`) for tests and dry runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use async_trait::async_trait;

use crate::{check_key, dir_prefix, ObjectStore, StoreError, Version, WriteOptions};

/// Objects kept in a `BTreeMap` behind a mutex; nothing touches the disk.
#[derive(Debug)]
pub struct MemoryStore {
    base_url: String,
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A fresh, private, empty store with base URL `memory://local`.
    pub fn new() -> Self {
        Self::named("local")
    }

    /// A fresh, private, empty store with base URL `memory://<name>`.
    /// Unlike [`crate::open`], this does not share data with other stores of
    /// the same name.
    pub fn named(name: &str) -> Self {
        MemoryStore {
            base_url: format!("memory://{}", name.trim_end_matches('/')),
            objects: Mutex::new(BTreeMap::new()),
        }
    }

    /// The process-global store for a `memory://name` URL: every call with
    /// the same name returns the same store.
    pub fn global(url: &str) -> Result<Arc<MemoryStore>, StoreError> {
        static STORES: OnceLock<Mutex<HashMap<String, Arc<MemoryStore>>>> = OnceLock::new();
        let name = url
            .strip_prefix("memory://")
            .ok_or_else(|| StoreError::UnsupportedScheme {
                url: url.to_string(),
            })?
            .trim_end_matches('/');
        if name.is_empty() {
            return Err(StoreError::InvalidUrl {
                url: url.to_string(),
                reason: "a memory store needs a name, e.g. `memory://test`".to_string(),
            });
        }
        let mut stores = STORES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Ok(stores
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(MemoryStore::named(name)))
            .clone())
    }

    fn objects(&self) -> MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // A panic while holding the lock cannot leave the map half-updated.
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ObjectStore for MemoryStore {
    fn base_url(&self) -> &str {
        &self.base_url
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(&self.base_url, key)?;
        Ok(self.objects().get(key).cloned())
    }

    async fn write(&self, key: &str, data: &[u8], options: WriteOptions) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        let mut objects = self.objects();
        if options.create_only && objects.contains_key(key) {
            return Err(StoreError::AlreadyExists {
                url: self.url_of(key),
            });
        }
        objects.insert(key.to_string(), data.to_vec());
        Ok(())
    }

    async fn write_if(
        &self,
        key: &str,
        data: &[u8],
        expected: &Version,
        _options: WriteOptions,
    ) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        // Compared and replaced under one lock: atomic.
        let mut objects = self.objects();
        match objects.get_mut(key) {
            Some(current) if Version::of_contents(current) == *expected => {
                *current = data.to_vec();
                Ok(())
            }
            _ => Err(StoreError::Conflict {
                url: self.url_of(key),
            }),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        self.objects().remove(key);
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = dir_prefix(&self.base_url, prefix)?;
        Ok(self
            .objects()
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect())
    }

    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = dir_prefix(&self.base_url, prefix)?;
        let children: BTreeSet<String> = self
            .objects()
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .filter_map(|k| k[prefix.len()..].split('/').next())
            .map(str::to_string)
            .collect();
        Ok(children.into_iter().collect())
    }
}
