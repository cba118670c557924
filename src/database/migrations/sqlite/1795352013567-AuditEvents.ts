import { MigrationInterface, QueryRunner } from 'typeorm';

export class AuditEvents1795352013567 implements MigrationInterface {
  name = 'AuditEvents1795352013567';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "audit_events" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "at" datetime NOT NULL, "actor_kind" varchar(16) NOT NULL, "actor_id" integer, "actor_name" varchar(256), "actor_key" varchar(256), "client_address" varchar(64), "operation" varchar(64) NOT NULL, "method" varchar(8) NOT NULL, "status_code" integer NOT NULL, "request_id" varchar(128) NOT NULL, "target_kind" varchar(32), "target_id" varchar(64), "cluster" varchar(253), "resource" varchar(253), "namespace" varchar(253), "name" varchar(253), "uid" varchar(64), "resource_version" varchar(64))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_audit_events_at" ON "audit_events" ("at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_actor" ON "audit_events" ("actor_key", "at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_operation" ON "audit_events" ("operation", "at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_cluster" ON "audit_events" ("cluster", "at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "idx_audit_events_cluster"`);
    await queryRunner.query(`DROP INDEX "idx_audit_events_operation"`);
    await queryRunner.query(`DROP INDEX "idx_audit_events_actor"`);
    await queryRunner.query(`DROP INDEX "idx_audit_events_at"`);
    await queryRunner.query(`DROP TABLE "audit_events"`);
  }
}
