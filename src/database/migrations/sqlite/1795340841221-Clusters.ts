import { MigrationInterface, QueryRunner } from 'typeorm';

export class Clusters1795340841221 implements MigrationInterface {
  name = 'Clusters1795340841221';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "clusters" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(253) NOT NULL, "description" varchar(1024) NOT NULL DEFAULT (''), "enabled" boolean NOT NULL DEFAULT (1), "in_cluster" boolean NOT NULL DEFAULT (0), "is_default" boolean NOT NULL DEFAULT (0), "metrics_url" varchar(2048) NOT NULL DEFAULT (''), "config_sealed" text, "server" varchar(2048) NOT NULL DEFAULT (''), "generation" integer NOT NULL DEFAULT (1), "version" varchar(128) NOT NULL DEFAULT (''), "status" varchar(16) NOT NULL DEFAULT ('unreachable'), "error" varchar(1024), "checked_at" datetime, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "updated_at" datetime NOT NULL, CONSTRAINT "UQ_9866753a0c6ffd4adebb5cc236b" UNIQUE ("name"))`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX "uq_clusters_one_default" ON "clusters" ("is_default") WHERE "is_default" = true`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "uq_clusters_one_default"`);
    await queryRunner.query(`DROP TABLE "clusters"`);
  }
}
