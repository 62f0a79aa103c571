//! A route table of the cluster: the public one (named after the cluster,
//! `kubernetes.io/kops/role: public`) and one per zone with private subnets
//! (`private-<zone>.<cluster>`, role `private-<zone>`). Its routes and
//! subnet associations are tasks of their own, found in the same batched
//! DescribeRouteTables.

use aws_sdk_ec2::types::ResourceType;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::managed_tags;
use crate::tasks::vpc::VpcId;

/// The tag kops marks its route tables' purpose with.
pub const TAG_KOPS_ROLE: &str = "kubernetes.io/kops/role";

/// A route table id, what routes and associations read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTableId(pub String);

impl FieldValue for RouteTableId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the route table should be.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteTable {
    /// The task name and `Name` tag.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct RouteTableActual {
    pub id: RouteTableId,
    pub vpc_id: String,
    pub tags: Tags,
}

impl RouteTable {
    pub const KIND: &'static str = "RouteTable";

    /// The handle routes and associations keep to read the table's id.
    pub fn id_ref(name: &str) -> OutputRef<RouteTableId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(table: &aws_sdk_ec2::types::RouteTable) -> RouteTableActual {
    RouteTableActual {
        id: RouteTableId(table.route_table_id().unwrap_or_default().to_string()),
        vpc_id: table.vpc_id().unwrap_or_default().to_string(),
        tags: tag_map(table.tags()),
    }
}

impl Task<AwsContext> for RouteTable {
    type Actual = RouteTableActual;
    type Output = RouteTableId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.vpc.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<RouteTableActual>, TaskError> {
        let cached = ctx
            .route_tables()
            .await?
            .iter()
            .find(|t| name_tag(t.tags()) == Some(self.name.as_str()));
        if let Some(table) = cached {
            return Ok(Some(actual_of(table)));
        }
        let Some(id) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        let out = unless_not_found(
            "DescribeRouteTables",
            &id,
            ctx.ec2()
                .describe_route_tables()
                .route_table_ids(&id)
                .send()
                .await,
        )?;
        match out.as_ref().and_then(|o| o.route_tables().first()) {
            Some(table) => Ok(Some(actual_of(table))),
            None => Err(not_visible_yet("route table", &id)),
        }
    }

    fn diff(
        &self,
        actual: Option<&RouteTableActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes
            .compare_reference(
                "vpc",
                actual.map(|a| a.vpc_id.as_str()),
                deps.try_get(&self.vpc)?.map(|v| v.0.as_str()),
                self.vpc.key(),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&RouteTableActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        match (actual, changes.get("vpc")) {
            (Some(_), Some(change)) => Err(TaskError::ImmutableField {
                field: "vpc",
                from: change.from.clone().unwrap_or_default(),
                to: change.to.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &RouteTableActual) -> RouteTableId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&RouteTableActual>,
        _: &Changes,
    ) -> Result<RouteTableId, TaskError> {
        if let Some(actual) = actual {
            write_missing_tags(ctx, &actual.id.0, &actual.tags, &self.tags).await?;
            return Ok(actual.id.clone());
        }
        let vpc = deps.get(&self.vpc)?;
        let out = ctx
            .ec2()
            .create_route_table()
            .vpc_id(&vpc.0)
            .tag_specifications(tag_spec(ResourceType::RouteTable, &self.tags))
            .send()
            .await
            .map_err(|e| classify("CreateRouteTable", &self.name, e))?;
        let id = out
            .route_table()
            .and_then(|t| t.route_table_id())
            .ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateRouteTable for `{}` returned no id",
                    self.name
                ))
            })?
            .to_string();
        ctx.remember_created(self.key(), &id);
        Ok(RouteTableId(id))
    }
}
