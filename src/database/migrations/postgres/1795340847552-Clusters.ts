import { MigrationInterface, QueryRunner } from 'typeorm';

export class Clusters1795340847552 implements MigrationInterface {
  name = 'Clusters1795340847552';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "clusters" ("id" SERIAL NOT NULL, "name" character varying(253) NOT NULL, "description" character varying(1024) NOT NULL DEFAULT '', "enabled" boolean NOT NULL DEFAULT true, "in_cluster" boolean NOT NULL DEFAULT false, "is_default" boolean NOT NULL DEFAULT false, "metrics_url" character varying(2048) NOT NULL DEFAULT '', "config_sealed" text, "server" character varying(2048) NOT NULL DEFAULT '', "generation" integer NOT NULL DEFAULT '1', "version" character varying(128) NOT NULL DEFAULT '', "status" character varying(16) NOT NULL DEFAULT 'unreachable', "error" character varying(1024), "checked_at" TIMESTAMP, "created_at" TIMESTAMP NOT NULL DEFAULT now(), "updated_at" TIMESTAMP NOT NULL, CONSTRAINT "UQ_9866753a0c6ffd4adebb5cc236b" UNIQUE ("name"), CONSTRAINT "PK_56c8e201f375e1e961dcdd6831c" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX "uq_clusters_one_default" ON "clusters"  ("is_default") WHERE "is_default" = true`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."uq_clusters_one_default"`);
    await queryRunner.query(`DROP TABLE "clusters"`);
  }
}
