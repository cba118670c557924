import { type DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dataSourceOptions } from './data-source.js';
import { LeaseEntity } from './lease.entity.js';
import { Leases } from './leases.js';
import { LocalWrites } from './local-writes.js';
import { ReplicaEntity } from './replica.entity.js';
import { Replicas } from './replicas.js';
import { Transactions } from './transactions.js';

/** The data source (migrations run at start) and the database's own services; `entities` come from src/entities.ts. */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(entities: Parameters<typeof dataSourceOptions>[1]): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({ ...dataSourceOptions(config, entities), migrationsRun: true }),
        }),
        TypeOrmModule.forFeature([LeaseEntity, ReplicaEntity]),
      ],
      providers: [Transactions, Leases, LocalWrites, Replicas],
      exports: [Transactions, Leases, LocalWrites, Replicas],
    };
  }
}
