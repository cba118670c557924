import { MigrationInterface, QueryRunner } from 'typeorm';

export class AuditEvents1795352013583 implements MigrationInterface {
  name = 'AuditEvents1795352013583';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "audit_events" ("id" SERIAL NOT NULL, "at" TIMESTAMP NOT NULL, "actor_kind" character varying(16) NOT NULL, "actor_id" integer, "actor_name" character varying(256), "actor_key" character varying(256), "client_address" character varying(64), "operation" character varying(64) NOT NULL, "method" character varying(8) NOT NULL, "status_code" integer NOT NULL, "request_id" character varying(128) NOT NULL, "target_kind" character varying(32), "target_id" character varying(64), "cluster" character varying(253), "resource" character varying(253), "namespace" character varying(253), "name" character varying(253), "uid" character varying(64), "resource_version" character varying(64), CONSTRAINT "PK_910f64d901a5c3e9878f0d4a407" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_audit_events_at" ON "audit_events" ("at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_actor" ON "audit_events" ("actor_key", "at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_operation" ON "audit_events" ("operation", "at") `);
    await queryRunner.query(`CREATE INDEX "idx_audit_events_cluster" ON "audit_events" ("cluster", "at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."idx_audit_events_cluster"`);
    await queryRunner.query(`DROP INDEX "public"."idx_audit_events_operation"`);
    await queryRunner.query(`DROP INDEX "public"."idx_audit_events_actor"`);
    await queryRunner.query(`DROP INDEX "public"."idx_audit_events_at"`);
    await queryRunner.query(`DROP TABLE "audit_events"`);
  }
}
