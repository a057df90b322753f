//! The `memory` role. Its gRPC service is defined and served so the mesh,
//! the charts and health checks treat it like every other role; the
//! behaviour it will own arrives with its own issue (see `DESIGN.md`).
//! Until then it answers only what it is — it fakes nothing.

checkfu_core::placeholder_role! {
    role: "memory",
    proto: checkfu_proto::memory::v1,
    server_mod: memory_service_server,
    service: MemoryService,
    server: MemoryServiceServer,
    owns: ["MemoryStores (versioned file trees)", "MemoryProposals", "Dreams"],
}
