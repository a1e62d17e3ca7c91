//! Namespaces and tokens on SQL (migrations `*_tenants.sql`).

use sless_core::resource_version::ResourceVersion;
use sless_core::tenant::{NamespacePhase, NamespaceRecord, Quotas, Role, StoredToken, TokenRecord};
use sless_core::traits::{Listed, Page, Tenants};
use sless_core::{Error, Result};

use super::rows::{json_err, parse_time, stored_count, stored_now, to_json, ts};
use super::{Pool, SqlRegistry, after_token, db_err};

/// A row of `namespaces`.
#[derive(sqlx::FromRow)]
struct NamespaceRow {
    name: String,
    quotas: String,
    phase: String,
    resource_version: i64,
    created_at: String,
    updated_at: String,
}

impl NamespaceRow {
    fn into_record(self) -> Result<NamespaceRecord> {
        let phase = match self.phase.as_str() {
            "Terminating" => NamespacePhase::Terminating,
            _ => NamespacePhase::Active,
        };
        Ok(NamespaceRecord {
            quotas: serde_json::from_str(&self.quotas).map_err(json_err)?,
            phase,
            resource_version: ResourceVersion::from_count(u64::try_from(self.resource_version).unwrap_or(0)),
            created_at: parse_time(&self.created_at)?,
            updated_at: parse_time(&self.updated_at)?,
            name: self.name,
        })
    }
}

/// A row of `tokens`.
#[derive(sqlx::FromRow)]
struct TokenRow {
    id: String,
    secret_hash: String,
    role: String,
    namespaces: String,
    description: String,
    created_at: String,
    expires_at: Option<String>,
}

impl TokenRow {
    fn into_stored(self) -> Result<StoredToken> {
        let role: Role = self.role.parse().map_err(|_| Error::Internal(format!("stored role {:?}", self.role)))?;
        let record = TokenRecord {
            role,
            namespaces: serde_json::from_str(&self.namespaces).map_err(json_err)?,
            description: self.description,
            created_at: parse_time(&self.created_at)?,
            expires_at: self.expires_at.as_deref().map(parse_time).transpose()?,
            id: self.id,
        };
        Ok(StoredToken { record, secret_hash: self.secret_hash })
    }
}

const INSERT_NAMESPACE: &str =
    "INSERT INTO namespaces (name, quotas, resource_version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)";
/// A `SELECT` of the token columns, followed by `$tail`.
macro_rules! select_token {
    ($tail:literal) => {
        concat!("SELECT id, secret_hash, role, namespaces, description, created_at, expires_at FROM tokens", $tail)
    };
}

impl SqlRegistry {
    async fn token_rows(&self) -> Result<Vec<StoredToken>> {
        let rows: Vec<TokenRow> =
            with_pool!(&self.pool, |p| sqlx::query_as(select_token!(" ORDER BY id")).fetch_all(p).await)
                .map_err(db_err)?;
        rows.into_iter().map(TokenRow::into_stored).collect()
    }

    /// Takes `name` out of every token's namespaces, deleting the tokens left with none.
    async fn forget_namespace_in_tokens(&self, name: &str) -> Result<()> {
        let tokens = self.token_rows().await?;
        with_pool!(&self.pool, |p| {
            let mut tx = p.begin().await.map_err(db_err)?;
            for token in tokens.iter().filter(|t| t.record.namespaces.iter().any(|n| n == name)) {
                let left: Vec<&String> = token.record.namespaces.iter().filter(|n| *n != name).collect();
                let q = if left.is_empty() {
                    sqlx::query("DELETE FROM tokens WHERE id = $1").bind(&token.record.id)
                } else {
                    sqlx::query("UPDATE tokens SET namespaces = $2 WHERE id = $1")
                        .bind(&token.record.id)
                        .bind(to_json(&left)?)
                };
                q.execute(&mut *tx).await.map_err(db_err)?;
            }
            tx.commit().await.map_err(db_err)
        })
    }
}

#[async_trait::async_trait]
impl Tenants for SqlRegistry {
    async fn ensure_namespace(&self, name: &str) -> Result<()> {
        let now = ts(stored_now());
        let inserted = with_pool!(&self.pool, |p| {
            sqlx::query(
                "INSERT INTO namespaces (name, quotas, resource_version, created_at, updated_at) \
                 VALUES ($1, '{}', 1, $2, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(&now)
            .execute(p)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if inserted > 0 {
            self.forget_namespace_in_tokens(name).await?;
        }
        Ok(())
    }

    async fn create_namespace(&self, name: &str, quotas: &Quotas) -> Result<NamespaceRecord> {
        let at = stored_now();
        let res = with_pool!(&self.pool, |p| {
            sqlx::query(INSERT_NAMESPACE).bind(name).bind(to_json(quotas)?).bind(ts(at)).execute(p).await.map(drop)
        });
        match res {
            Ok(()) => {
                self.forget_namespace_in_tokens(name).await?;
                Ok(NamespaceRecord {
                    name: name.to_string(),
                    quotas: *quotas,
                    phase: NamespacePhase::Active,
                    resource_version: ResourceVersion::from_count(1),
                    created_at: at,
                    updated_at: at,
                })
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(Error::AlreadyExists { kind: "namespace", name: name.into() })
            }
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_namespace(&self, name: &str) -> Result<NamespaceRecord> {
        let row: Option<NamespaceRow> = with_pool!(&self.pool, |p| {
            sqlx::query_as("SELECT * FROM namespaces WHERE name = $1").bind(name).fetch_optional(p).await
        })
        .map_err(db_err)?;
        row.ok_or_else(|| Error::NotFound { kind: "namespace", name: name.into() })?.into_record()
    }

    async fn list_namespaces(&self, page: &Page) -> Result<Listed<NamespaceRecord>> {
        let after = after_token(page)?;
        let limit = i64::from(page.limit) + 1;
        let rows: Vec<NamespaceRow> = with_pool!(&self.pool, |p| {
            sqlx::query_as("SELECT * FROM namespaces WHERE name > $1 ORDER BY name LIMIT $2")
                .bind(after)
                .bind(limit)
                .fetch_all(p)
                .await
        })
        .map_err(db_err)?;
        let items = rows.into_iter().map(NamespaceRow::into_record).collect::<Result<Vec<_>>>()?;
        Ok(Listed::from_overfetch(items, page.limit, |n: &NamespaceRecord| n.name.clone()))
    }

    async fn replace_quotas(
        &self,
        name: &str,
        quotas: &Quotas,
        expected: Option<&ResourceVersion>,
    ) -> Result<NamespaceRecord> {
        let expected_count = expected.map(stored_count).transpose()?;
        let quotas_json = to_json(quotas)?;
        let now = ts(stored_now());
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query(
                "UPDATE namespaces SET quotas = $1, resource_version = resource_version + 1, updated_at = $2 \
                 WHERE name = $3 AND ($4 IS NULL OR resource_version = $4)",
            )
            .bind(&quotas_json)
            .bind(&now)
            .bind(name)
            .bind(expected_count)
            .execute(p)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        let current = self.get_namespace(name).await?;
        if affected == 0 {
            return Err(Error::Stale {
                expected: expected.map(ToString::to_string).unwrap_or_default(),
                current: current.resource_version.to_string(),
            });
        }
        Ok(current)
    }

    async fn terminate_namespace(&self, name: &str) -> Result<()> {
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query("UPDATE namespaces SET phase = 'Terminating' WHERE name = $1")
                .bind(name)
                .execute(p)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected == 0 {
            return Err(Error::NotFound { kind: "namespace", name: name.into() });
        }
        Ok(())
    }

    async fn delete_namespace(&self, name: &str) -> Result<()> {
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query("DELETE FROM namespaces WHERE name = $1").bind(name).execute(p).await.map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected == 0 {
            return Err(Error::NotFound { kind: "namespace", name: name.into() });
        }
        self.forget_namespace_in_tokens(name).await
    }

    async fn create_token(&self, token: &StoredToken) -> Result<()> {
        let r = &token.record;
        let res = with_pool!(&self.pool, |p| {
            sqlx::query(
                "INSERT INTO tokens (id, secret_hash, role, namespaces, description, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&r.id)
            .bind(&token.secret_hash)
            .bind(r.role.as_str())
            .bind(to_json(&r.namespaces)?)
            .bind(&r.description)
            .bind(ts(r.created_at))
            .bind(r.expires_at.map(ts))
            .execute(p)
            .await
            .map(drop)
        });
        match res {
            Ok(()) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(Error::AlreadyExists { kind: "token", name: r.id.clone() })
            }
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_token(&self, id: &str) -> Result<StoredToken> {
        let row: Option<TokenRow> = with_pool!(&self.pool, |p| sqlx::query_as(select_token!(" WHERE id = $1"))
            .bind(id)
            .fetch_optional(p)
            .await)
        .map_err(db_err)?;
        row.ok_or_else(|| Error::NotFound { kind: "token", name: id.into() })?.into_stored()
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        Ok(self.token_rows().await?.into_iter().map(|t| t.record).collect())
    }

    async fn delete_token(&self, id: &str) -> Result<()> {
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query("DELETE FROM tokens WHERE id = $1").bind(id).execute(p).await.map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected == 0 {
            return Err(Error::NotFound { kind: "token", name: id.into() });
        }
        Ok(())
    }
}
