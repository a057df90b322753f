//! The `scheduler` role. Its gRPC service is defined and served so the mesh,
//! the charts and health checks treat it like every other role; the
//! behaviour it will own arrives with its own issue (see `DESIGN.md`).
//! Until then it answers only what it is — it fakes nothing.

checkfu_core::placeholder_role! {
    role: "scheduler",
    proto: checkfu_proto::scheduler::v1,
    server_mod: scheduler_service_server,
    service: SchedulerService,
    server: SchedulerServiceServer,
    owns: ["Automations", "AutomationGraphs", "AutomationFirings", "timers and schedules", "handing Runs to Runner pools"],
}
