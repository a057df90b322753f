//! The production bus: Kafka through rdkafka. The producer is idempotent
//! with `acks=all`, so a retried send neither duplicates nor reorders within
//! a partition, and records with one key share a partition. A send waits at
//! most `message.timeout.ms`; with the broker down it fails and the outbox
//! keeps the records for the next attempt.

use crate::{Bus, Delivery, Record, Subscription};
use checkfu_core::{Error, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use std::time::Duration;

/// How long one publish may wait for the broker before the relay retries.
const SEND_TIMEOUT_MS: &str = "10000";

#[derive(Clone)]
pub struct KafkaBus {
    brokers: String,
    producer: FutureProducer,
}

fn kafka_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::unavailable(format!("kafka {what}: {e}"))
}

impl KafkaBus {
    pub fn new(brokers: &str) -> Result<Self> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "2")
            .set("message.timeout.ms", SEND_TIMEOUT_MS)
            .create()
            .map_err(|e| kafka_err("producer", e))?;
        Ok(KafkaBus { brokers: brokers.to_string(), producer })
    }

    /// Creates the topics that do not exist yet.
    pub async fn ensure_topics(&self, topics: &[(&str, i32)]) -> Result<()> {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &self.brokers).create().map_err(|e| kafka_err("admin", e))?;
        let new: Vec<NewTopic> = topics.iter().map(|(name, parts)| NewTopic::new(name, *parts, TopicReplication::Fixed(1))).collect();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        for r in admin.create_topics(&new, &opts).await.map_err(|e| kafka_err("create topics", e))? {
            match r {
                Ok(_) => {}
                Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => return Err(kafka_err(&format!("create topic {name}"), code)),
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Bus for KafkaBus {
    async fn publish(&self, records: &[Record]) -> Result<()> {
        // Enqueue all in order, then wait for every acknowledgement.
        let mut pending = Vec::with_capacity(records.len());
        for r in records {
            let mut headers = OwnedHeaders::new().insert(Header { key: "id", value: Some(r.id.as_str()) });
            for (k, v) in &r.headers {
                headers = headers.insert(Header { key: k.as_str(), value: Some(v.as_str()) });
            }
            let rec = FutureRecord::to(&r.topic).key(&r.key).payload(&r.payload).headers(headers);
            pending.push(self.producer.send_result(rec).map_err(|(e, _)| kafka_err("enqueue", e))?);
        }
        for p in pending {
            match p.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(kafka_err("publish", e)),
                Err(_) => return Err(Error::unavailable("kafka publish was cancelled")),
            }
        }
        Ok(())
    }

    async fn subscribe(&self, topic: &str, group: &str) -> Result<Box<dyn Subscription>> {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .create()
            .map_err(|e| kafka_err("consumer", e))?;
        consumer.subscribe(&[topic]).map_err(|e| kafka_err("subscribe", e))?;
        Ok(Box::new(KafkaSubscription { consumer }))
    }

    async fn ready(&self) -> bool {
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || producer.client().fetch_metadata(None, Duration::from_secs(2)).is_ok()).await.unwrap_or(false)
    }
}

struct KafkaSubscription {
    consumer: StreamConsumer,
}

#[async_trait::async_trait]
impl Subscription for KafkaSubscription {
    async fn next(&mut self) -> Result<Delivery> {
        let m = self.consumer.recv().await.map_err(|e| kafka_err("receive", e))?;
        let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
        let mut id = String::new();
        let mut headers = vec![];
        if let Some(hs) = m.headers() {
            for h in hs.iter() {
                let v = text(h.value);
                if h.key == "id" {
                    id = v;
                } else {
                    headers.push((h.key.to_string(), v));
                }
            }
        }
        Ok(Delivery {
            record: Record { topic: m.topic().to_string(), key: text(m.key()), id, payload: text(m.payload()), headers },
            partition: m.partition(),
            offset: m.offset(),
        })
    }

    async fn commit(&mut self, d: &Delivery) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&d.record.topic, d.partition, Offset::Offset(d.offset + 1)).map_err(|e| kafka_err("commit", e))?;
        self.consumer.commit(&tpl, CommitMode::Async).map_err(|e| kafka_err("commit", e))
    }
}
